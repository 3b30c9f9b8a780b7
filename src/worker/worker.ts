import type { Logger } from "pino";
import { hydrateWarmCache } from "../cache/start-cache.js";
import type { CacheRun, WarmCache } from "../cache/warm-cache.js";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import { createLogger } from "../log/index.js";
import { type RunningSidecars, startSidecars } from "../sidecar/start-sidecars.js";
import { loadTelemetry, type WorkerTelemetry } from "../telemetry/index.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { WorkerEventHub, type WorkerEvents, type WorkerListener } from "./events.js";
import type { Executor, ExecutorSettings } from "./executor.js";
import { checkFitness } from "./fitness/run-fitness.js";
import { runHealthLoop } from "./health.js";
import type { Heartbeat } from "./heartbeat.js";
import { JobBoard } from "./job-board.js";
import { PlatformHttp } from "./platform-http.js";
import { SETUP_CHECK } from "./setup.js";
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
  /** The start-up phases before the first take (fitness, ..., setup), and the `ready` report. */
  readonly #phases: StartupPhases;
  /** When close() began, on the worker's clock: teardown gets what is left of the grace. */
  #closingAt = 0;
  /** The handler's warm cache, once hydrated (docs/fitness.md, "Warm cache"). */
  #cache: WarmCache | undefined;
  /** The env the worker was started with: sidecars inherit it. */
  readonly #env: Readonly<Record<string, string | undefined>>;
  /** The handler's sidecars once started (docs/models.md, "Sidecars"); stopped after the jobs at shutdown. */
  #sidecars: RunningSidecars | undefined;

  readonly #telemetry: WorkerTelemetry | undefined;

  /** @internal use {@link startWorker}. */
  constructor(
    definition: HandlerDefinition,
    config: WorkerConfig,
    log: Logger,
    env: Readonly<Record<string, string | undefined>> = {},
    telemetry?: WorkerTelemetry,
  ) {
    this.#env = env;
    this.#definition = definition;
    this.#config = config;
    this.#log = log;
    this.#events = new WorkerEventHub(log);
    this.#phases = new StartupPhases(this.#events, log);
    this.#telemetry = telemetry;
    telemetry?.attach(this.#events, this);
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
    this.#executor = createExecutor(definition, config, settings, log, this.#stopper, this.#events);
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
      this.#removeSignalHandlers = installSignalHandlers(log, {
        first: () => void this.#stopper.signal().then((exitCode) => this.#exitProcess(exitCode)),
        second: () => this.#exitProcess(1),
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
      runHealthLoop(definition, log, this.#closing.signal, this.#stopper, config.clock),
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
    // Start-up, in order (docs/worker.md, "Start-up phases"); docs/protocol.md, "Unfit workers": a
    // worker unfit from the start takes no job at all.
    const phases = this.#phases;
    // One turn first, so a listener added as startWorker resolves sees every start-up event.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const fitness = {
      definition: this.#definition,
      config: this.#config.fitness,
      builtIn: this.#config.fitnessChecks,
      log: this.#log,
      closing: this.#closing.signal,
      clock: this.#config.clock,
    };
    // The fitness phase runs where there is something to check: the built-in checks (on the
    // platform, docs/fitness.md) or the handler's own healthCheck.
    const checks = this.#config.fitnessChecks || this.#definition.healthCheck !== undefined;
    if (checks && !(await phases.run("fitness", () => checkFitness(fitness, this.#stopper)))) return;
    // The warm cache, before setup; a failure is a cold start (unfit only under `strict`).
    if (this.#definition.warmCache !== undefined && !(await phases.run("cache", () => this.#hydrate())))
      return;
    // Start-up step 3 (docs/models.md, "Start-up phases"): the sidecars, started and answering.
    if (this.#definition.sidecars.length > 0 && !(await phases.run("sidecar", () => this.#startSidecars())))
      return;
    if (this.#definition.setup !== undefined && !(await phases.run("setup", () => this.#setup()))) return;
    if (this.#closing.signal.aborted) return;
    // After setup: send what setup produced to the volume, without delaying the first take.
    this.#cache?.startSync();
    // Pings held during setup start now, as the Python SDK's start with serverless.start().
    this.#heartbeat?.beginPings();
    phases.ready();
    await runTakeLoop(parts, this.#board);
  }

  /**
   * The handler's `setup` where it runs (the runner: in-process, or the first isolation thread);
   * false when it failed or the worker closed meanwhile. A failure makes the worker unfit with
   * `check=setup` (docs/protocol.md, "Unfit workers"): no job is taken, exit code 1.
   */
  async #setup(): Promise<boolean> {
    const outcome = await this.#executor.setup({
      closing: this.#closing.signal,
      progress: (text) => {
        this.#log.info({ setupProgress: text }, `setup: ${text}`);
        this.#events.emit("setupProgress", { text });
      },
    });
    if (outcome.ok) return true;
    if (!this.#closing.signal.aborted) void this.#stopper.unfit(SETUP_CHECK, outcome.reason);
    return false;
  }

  /** Starts the handler's sidecars and waits for them; false when the worker became unfit or closed. */
  async #startSidecars(): Promise<boolean> {
    this.#sidecars = await startSidecars({
      sidecars: this.#definition.sidecars,
      log: this.#log,
      clock: this.#config.clock,
      closing: this.#closing.signal,
      env: this.#env,
      unfit: (check, reason) => this.#stopper.unfit(check, reason),
      failRunningJobs: (reason) => {
        for (const job of this.#board.jobs()) job.shutdown(reason);
      },
    });
    return this.#sidecars !== undefined;
  }

  /** Hydrates the warm cache (docs/fitness.md, "Warm cache"); false when the worker became unfit. */
  async #hydrate(): Promise<boolean> {
    try {
      this.#cache = await hydrateWarmCache(
        this.#definition.warmCache,
        this.#log,
        this.#config.endpointId,
        this.#closing.signal,
      );
      return true;
    } catch (err) {
      // Cut short by shutdown (its signal aborts the hydrate): no verdict on the volume.
      if (this.#closing.signal.aborted) return false;
      void this.#stopper.unfit("cache", err instanceof Error ? err.message : String(err));
      return false;
    }
  }

  /**
   * Sends the warm cache's new files to the network volume now (docs/fitness.md, "Warm cache"), e.g.
   * after a job compiled a kernel; undefined without `warmCache` or before it was hydrated.
   *
   * @example
   * worker.on("finished", () => void worker.syncWarmCache());
   */
  syncWarmCache(): Promise<CacheRun | undefined> {
    return this.#cache === undefined ? Promise.resolve(undefined) : this.#cache.sync();
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
    this.#closingAt = this.#config.clock.now();
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
      // The model goes after the jobs that used it, within what is left of the grace.
      const left = this.#config.shutdownGraceMs - (this.#config.clock.now() - this.#closingAt);
      await this.#executor.teardown(Math.max(0, left));
      // The last sync, bounded by warmCache.shutdownSyncMs; never throws.
      await this.#cache?.close();
    } finally {
      this.#stopPolling.abort();
      await this.#stopPoll;
      this.#giveUp.abort();
      this.#removeSignalHandlers?.();
      // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
      await this.#stopper.unhealthyPing;
      // The sidecars stop after the running jobs (finishJobs above) and the executor's close.
      const steps = [
        this.#executor.close().finally(() => this.#sidecars?.close()),
        this.#heartbeat?.close(),
        this.#http.close(),
        this.#telemetry?.shutdown(),
      ];
      for (const result of await Promise.allSettled(steps)) {
        if (result.status === "rejected") this.#log.warn({ err: result.reason }, "a clean-up step failed");
      }
      const info = this.#stopper.info;
      this.#log.info({ reason: info.reason }, "worker stopped");
      this.#resolveStopped(info);
      this.#events.emit("stopped", info);
      // A runaway in-process handler still holds the main thread's work: end the process.
      if (info.reason === "runaway" && this.#config.exitOnHardStop) this.#exitProcess(1);
    }
  }

  /**
   * The one place the worker ends its process: after a signal's shutdown (`handleSignals`), at a
   * second signal, and after a runaway handler (`exitOnHardStop`). Nothing else in the worker
   * calls process.exit.
   */
  #exitProcess(code: number): void {
    process.exit(code);
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
  const telemetry = await loadTelemetry(
    options.telemetry,
    options.env,
    { workerId: config.podId, endpointId: config.endpointId },
    log,
  );
  return new Worker(definition, config, log, options.env, telemetry);
}
