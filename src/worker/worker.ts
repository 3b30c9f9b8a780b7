import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import type { Unfitness } from "../handler/unfit.js";
import { createLogger } from "../log/index.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { WorkerEventHub, type WorkerEvents, type WorkerListener } from "./events.js";
import type { Executor, ExecutorSettings } from "./executor.js";
import { runHealthCheck, runHealthLoop } from "./health.js";
import type { Heartbeat } from "./heartbeat.js";
import { JobBoard } from "./job-board.js";
import { PlatformHttp } from "./platform-http.js";
import { finishJobs } from "./shutdown.js";
import { installSignalHandlers } from "./signals.js";
import { pollJobStops } from "./stop-poll.js";
import { type LoopParts, runTakeLoop } from "./take-loop.js";
import { createExecutor, createHeartbeat, s3Settings } from "./worker-parts.js";

/** Why and how a worker stopped. */
export interface WorkerStopInfo {
  /**
   * `closed`: close() was called; `signal`: SIGTERM/SIGINT; `runaway`: an in-process handler ignored
   * its deadline; `unhealthy`: a health check failed or code reported the worker unfit (§7);
   * `refresh`: a job's result asked the platform to replace the worker (`stopPod`, from
   * `refreshWorker`), so the worker stopped taking jobs after it.
   */
  readonly reason: "closed" | "signal" | "runaway" | "unhealthy" | "refresh";
  /**
   * The exit code the process should end with: 0 (also after a requested refresh, which is no
   * failure), or 1 after a runaway handler or unfitness.
   */
  readonly exitCode: number;
}

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
  #loops: Promise<void>;
  #closed: Promise<void> | undefined;
  #stopInfo: WorkerStopInfo = { reason: "closed", exitCode: 0 };
  #resolveStopped!: (info: WorkerStopInfo) => void;
  #removeSignalHandlers: (() => void) | undefined;
  #unfit: Unfitness | undefined;
  #unhealthyPing: Promise<void> | undefined;
  /** Resolves once the worker has fully stopped (after close(), a signal, or a runaway handler). */
  readonly stopped: Promise<WorkerStopInfo>;
  readonly #events: WorkerEventHub;

  /** @internal use {@link startWorker}. */
  constructor(definition: HandlerDefinition, config: WorkerConfig, log: Logger) {
    this.#definition = definition;
    this.#config = config;
    this.#log = log;
    this.#events = new WorkerEventHub(log);
    this.stopped = new Promise((resolve) => {
      this.#resolveStopped = resolve;
    });
    this.#http = new PlatformHttp(config.apiKey);
    const settings: ExecutorSettings = {
      identity: { hostname: config.hostname, workerId: config.podId },
      bucket: config.bucket,
      s3: s3Settings(config, definition),
    };
    // A handler that loads here but not in an isolation thread makes the worker unfit (§7).
    this.#executor = createExecutor(definition, config, settings, log, (reason) => {
      void this.reportUnfit("handler-load", reason);
    });
    this.#heartbeat = createHeartbeat(definition, config, log);
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
        onRunaway: (jobId) => this.#onRunaway(jobId),
        onUnfit: (unfit) => void this.reportUnfit(unfit.check, unfit.reason),
        onStopPod: (jobId) => this.#onStopPod(jobId),
      },
      this.#closing.signal,
    );
    if (config.handleSignals) {
      this.#removeSignalHandlers = installSignalHandlers({
        log,
        shutdown: async () => {
          if (this.#stopInfo.reason === "closed") this.#stopInfo = { reason: "signal", exitCode: 0 };
          await this.close();
          return this.#stopInfo.exitCode;
        },
      });
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
      pollJobStops(loopParts, this.#board),
      runHealthLoop(definition, this.#closing.signal, () => this.#checkHealth()),
    ]).then(() => undefined);
  }

  /**
   * Listens to a lifecycle event (taken, started, progress, finished, failed, retrying, stopped);
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

  /** The handler's healthCheck, run once; a failure makes the worker unfit. False when it failed. */
  async #checkHealth(): Promise<boolean> {
    const unfit = await runHealthCheck(this.#definition, this.#log, this.#closing.signal);
    if (unfit === undefined) return true;
    void this.reportUnfit(unfit.check, unfit.reason);
    return false;
  }

  async #takeLoop(parts: LoopParts): Promise<void> {
    // §7: a worker unfit from the start takes no job at all.
    if (!(await this.#checkHealth())) return;
    await runTakeLoop(parts, this.#board);
  }

  /**
   * A result with `stopPod` is queued: the platform replaces this worker after it, so the worker
   * takes nothing more; other running jobs finish (up to the grace) and report, then it stops.
   * Unfitness or a runaway handler keep their own reason and exit code 1.
   */
  #onStopPod(jobId: string): void {
    if (this.#closed !== undefined || this.#unfit !== undefined) return;
    this.#log.info(
      { jobId },
      "a result asked the platform to replace this worker (stopPod); taking no more jobs, finishing the running ones, then stopping",
    );
    if (this.#stopInfo.reason === "closed") this.#stopInfo = { reason: "refresh", exitCode: 0 };
    void this.close();
  }

  #onRunaway(jobId: string): void {
    this.#log.error(
      { jobId },
      this.#config.exitOnHardStop
        ? "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and exits so the platform replaces it"
        : "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and stops taking jobs",
    );
    this.#stopInfo = { reason: "runaway", exitCode: 1 };
    void this.close().then(() => {
      if (this.#config.exitOnHardStop) process.exit(1);
    });
  }

  /**
   * Declares this worker unfit (worker-protocol §7): stops taking jobs, pings once with
   * `status=unhealthy&check=<check>&reason=<reason>`, then closes as close() does; `stopped`
   * resolves with `{reason: "unhealthy", exitCode: 1}`. A failed `healthCheck` or a handler's
   * `WorkerUnfitError` calls it. Idempotent: later calls return the same promise as close().
   *
   * @example
   * gpu.on("lost", () => void worker.reportUnfit("gpu", "CUDA device lost"));
   */
  reportUnfit(check: string, reason: string): Promise<void> {
    if (this.#unfit === undefined) {
      this.#unfit = { check, reason };
      this.#log.error(
        { code: "RUNLET_WORKER_UNFIT", check, reason },
        `the worker is unfit (${check}: ${reason}); pinging unhealthy, stopping, exit code 1`,
      );
      if (this.#stopInfo.reason !== "runaway") this.#stopInfo = { reason: "unhealthy", exitCode: 1 };
      // Stop taking before the ping goes out, so no job arrives at a worker that declared itself unfit.
      this.#closing.abort();
      this.#board.wake();
      this.#unhealthyPing = this.#heartbeat?.unhealthy(check, reason);
    }
    return this.close();
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
    this.#closing.abort();
    this.#board.wake();
    try {
      await this.#loops;
      await finishJobs({
        board: this.#board,
        shutdownGraceMs: this.#config.shutdownGraceMs,
        flushTimeoutMs: this.#config.flushTimeoutMs,
        giveUp: this.#giveUp,
      });
    } finally {
      this.#giveUp.abort();
      this.#removeSignalHandlers?.();
      // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
      await this.#unhealthyPing;
      const steps = [this.#executor.close(), this.#heartbeat?.close(), this.#http.close()];
      for (const result of await Promise.allSettled(steps)) {
        if (result.status === "rejected") this.#log.warn({ err: result.reason }, "a clean-up step failed");
      }
      this.#log.info({ reason: this.#stopInfo.reason }, "worker stopped");
      this.#resolveStopped(this.#stopInfo);
      this.#events.emit("stopped", this.#stopInfo);
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
