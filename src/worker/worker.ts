import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import { createLogger } from "../log/index.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { WorkerEventHub, type WorkerEvents, type WorkerListener } from "./events.js";
import type { Executor, ExecutorSettings } from "./executor.js";
import { checkHealth, runHealthLoop } from "./health.js";
import type { Heartbeat } from "./heartbeat.js";
import { JobBoard } from "./job-board.js";
import { PlatformHttp } from "./platform-http.js";
import { finishJobs } from "./shutdown.js";
import { installSignalHandlers } from "./signals.js";
import { StartupPhases } from "./startup-phases.js";
import { pollJobStops } from "./stop-poll.js";
import { type LoopParts, runTakeLoop } from "./take-loop.js";
import { createExecutor, createHeartbeat, s3Settings } from "./worker-parts.js";
import { type WorkerStopInfo, WorkerStopper } from "./worker-stopper.js";

export type { WorkerStopInfo } from "./worker-stopper.js";

/**
 * The worker loop: takes jobs (never more than free slots), runs them, reports every result, and
 * shuts down gracefully. Create it with {@link startWorker}.
 */
export class Worker {
  readonly #config: WorkerConfig;
  readonly #definition: HandlerDefinition;
  readonly #log: Logger;
  readonly #http: PlatformHttp;
  readonly #executor: Executor;
  readonly #heartbeat: Heartbeat | undefined;
  /** The jobs held and the slots: what the take loop, the job-stop poll and shutdown work on. */
  readonly #board: JobBoard;
  readonly #closing = new AbortController();
  readonly #giveUp = new AbortController();
  /**
   * Ends the job-stop poll: after the shutdown grace, not with `#closing`, so a job-stop sent
   * while running jobs finish up is still seen.
   */
  readonly #stopPolling = new AbortController();
  /** The take loop and the health loop: they end with `#closing`. */
  #loops: Promise<void>;
  /** The job-stop poll: it ends with `#stopPolling`. */
  readonly #stopPoll: Promise<void>;
  /** Why the worker stops: signals, stopPod results, runaway handlers and unfitness end up there. */
  readonly #stopper: WorkerStopper;
  #closed: Promise<void> | undefined;
  #resolveStopped!: (info: WorkerStopInfo) => void;
  #removeSignalHandlers: (() => void) | undefined;
  /** Resolves once the worker has fully stopped (after close(), a signal, or a runaway handler). */
  readonly stopped: Promise<WorkerStopInfo>;
  readonly #events: WorkerEventHub;
  readonly #phases: StartupPhases;

  /** @internal use {@link startWorker}. */
  constructor(definition: HandlerDefinition, config: WorkerConfig, log: Logger) {
    this.#definition = definition;
    this.#config = config;
    this.#log = log;
    this.#events = new WorkerEventHub(log);
    this.#phases = new StartupPhases(log, this.#events);
    this.stopped = new Promise((resolve) => {
      this.#resolveStopped = resolve;
    });
    this.#http = new PlatformHttp(config.apiKey);
    const settings: ExecutorSettings = {
      identity: { hostname: config.hostname, workerId: config.podId },
      bucket: config.bucket,
      s3: s3Settings(config, definition),
    };
    // A heartbeat thread that dies leaves the worker unable to be seen holding jobs: the platform
    // would lapse them and run them twice. Stop taking, finish what can be finished, report, exit 1.
    this.#heartbeat = createHeartbeat(definition, config, log, (reason) => {
      void this.#stopper.unfit("heartbeat", reason);
    });
    this.#stopper = new WorkerStopper({
      log,
      exitOnHardStop: config.exitOnHardStop,
      heartbeat: this.#heartbeat,
      closing: this.#closing,
      close: () => this.close(),
    });
    this.#executor = createExecutor(definition, config, settings, log, this.#stopper);
    this.#board = new JobBoard(
      {
        config,
        definition,
        http: this.#http,
        executor: this.#executor,
        heartbeat: this.#heartbeat,
        log,
        giveUp: this.#giveUp.signal,
        s3: settings.s3,
        events: this.#events,
        stopper: this.#stopper,
      },
      this.#closing.signal,
    );
    if (config.handleSignals) {
      this.#removeSignalHandlers = installSignalHandlers(log, this.#stopper);
    }
    log.info({ workerId: config.podId, isolation: definition.isolation }, "worker started");
    for (const warning of config.warnings) log.warn(warning);
    if (config.urls.stop === undefined) {
      log.warn(
        "the job-take URL has no /job-take/ segment: job-stop is off (the platform cannot stop a running job), and batch takes add batch_size to the job-take URL",
      );
    }
    const loopParts: LoopParts = { config, http: this.#http, log, closing: this.#closing.signal };
    this.#loops = Promise.all([
      this.#takeLoop(loopParts),
      runHealthLoop(definition, log, this.#closing.signal, this.#stopper),
    ]).then(() => undefined);
    this.#stopPoll = pollJobStops({ ...loopParts, closing: this.#stopPolling.signal }, this.#board);
  }

  /**
   * Listens to a lifecycle event (phase, setupProgress, ready, taken, started, progress, finished,
   * failed, retrying, stopped);
   * returns a function that removes the listener. A listener that throws is logged and ignored.
   */
  on<K extends keyof WorkerEvents>(event: K, listener: WorkerListener<K>): () => void {
    return this.#events.on(event, listener);
  }

  /** Removes a listener added with {@link on}. */
  off<K extends keyof WorkerEvents>(event: K, listener: WorkerListener<K>): void {
    this.#events.off(event, listener);
  }

  /** This worker's id (RUNPOD_POD_ID). */
  get id(): string {
    return this.#config.podId;
  }

  /** Ids of the jobs running or still being reported. */
  get jobIds(): string[] {
    return this.#board.ids();
  }

  /** The current concurrency. */
  get concurrency(): number {
    return this.#board.concurrency;
  }

  async #takeLoop(parts: LoopParts): Promise<void> {
    this.#phases.loaded();
    // One turn first, so a listener added as startWorker resolves sees every start-up event.
    await new Promise<void>((resolve) => setImmediate(resolve));
    // docs/protocol.md, "Unfit workers": a worker unfit from the start takes no job at all.
    this.#phases.started("fitness");
    const fit = await checkHealth(this.#definition, this.#log, this.#closing.signal, this.#stopper);
    this.#phases.ended("fitness", fit ? "done" : "failed");
    if (!fit || this.#closing.signal.aborted) return;
    this.#phases.ready();
    await runTakeLoop(parts, this.#board);
  }

  /**
   * Declares this worker unfit (docs/protocol.md, "Unfit workers"): stops taking jobs, pings once with
   * `status=unhealthy&check=<check>&reason=<reason>`, then closes as close() does; `stopped`
   * resolves with `{reason: "unhealthy", exitCode: 1}`. A failed `healthCheck` or a handler's
   * `WorkerUnfitError` calls it. Idempotent: later calls return the same promise as close().
   *
   * @example
   * gpu.on("lost", () => void worker.reportUnfit("gpu", "CUDA device lost"));
   */
  reportUnfit(check: string, reason: string): Promise<void> {
    return this.#stopper.unfit(check, reason);
  }

  /**
   * Stops taking jobs, lets running ones finish up to `shutdownGraceMs`, then aborts the rest and
   * reports each as failed, flushes every outbox (up to `flushTimeoutMs`) and releases everything.
   * Idempotent: every call returns the same promise. Does not exit the process.
   */
  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #shutdown(): Promise<void> {
    // Also ends the loops' waits on the job board.
    this.#closing.abort();
    try {
      await this.#loops;
      await finishJobs({
        board: this.#board,
        shutdownGraceMs: this.#config.shutdownGraceMs,
        flushTimeoutMs: this.#config.flushTimeoutMs,
        giveUp: this.#giveUp,
      });
    } finally {
      this.#stopPolling.abort();
      await this.#stopPoll;
      this.#giveUp.abort();
      this.#removeSignalHandlers?.();
      // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
      await this.#stopper.unhealthyPing;
      const steps = [this.#executor.close(), this.#heartbeat?.close(), this.#http.close()];
      for (const result of await Promise.allSettled(steps)) {
        if (result.status === "rejected") this.#log.warn({ err: result.reason }, "a clean-up step failed");
      }
      const info = this.#stopper.info;
      this.#log.info({ reason: info.reason }, "worker stopped");
      this.#resolveStopped(info);
      this.#events.emit("stopped", info);
    }
  }
}

/**
 * Starts a worker for `definition` against the platform described by `options.env`.
 *
 * @example
 * const worker = await startWorker(handler, { env: process.env, handleSignals: true });
 * await worker.stopped;
 */
export async function startWorker(definition: HandlerDefinition, options: WorkerOptions): Promise<Worker> {
  if (!isHandlerDefinition(definition)) {
    throw new RunletError("RUNLET_HANDLER_INVALID", "startWorker needs a defineHandler(...) result");
  }
  const config = resolveWorkerConfig(options);
  if (
    definition.isolation === "thread" &&
    config.handlerModule === undefined &&
    config.threadEntry === undefined
  ) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      'isolation: "thread" needs handlerModule (the handler file) or threadEntry (a bundle\'s own file) so threads can load the handler',
    );
  }
  const log =
    options.logger ??
    createLogger({
      platform: config.endpointId !== undefined,
      level: config.logLevel,
      ...(options.logDestination === undefined ? {} : { destination: options.logDestination }),
      secrets: config.apiKey === undefined ? [] : [config.apiKey],
    });
  return new Worker(definition, config, log);
}
