import type { Logger } from "pino";
import type { CacheRun, WarmCache } from "../cache/warm-cache.js";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import { createLogger } from "../log/index.js";
import { type RunningSidecars, startSidecars } from "../sidecar/start-sidecars.js";
import { loadTelemetry, type WorkerTelemetry } from "../telemetry/index.js";
import { WaiterSet } from "../wait.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { WorkerEventHub, type WorkerEvents, type WorkerListener } from "./events.js";
import type { ExecutorSettings, Runner } from "./executor.js";
import { checkFitness } from "./fitness/run-fitness.js";
import { runHealthLoop } from "./health.js";
import type { Heartbeat } from "./heartbeat.js";
import { JobBoard } from "./job-board.js";
import { WorkerLifecycle, type WorkerStopInfo } from "./lifecycle.js";
import { PlatformHttp } from "./platform-http.js";
import { SETUP_CHECK } from "./setup.js";
import { drainJobs, flushReports } from "./shutdown.js";
import { StartupPhases } from "./startup-phases.js";
import { pollJobStops } from "./stop-poll.js";
import { type LoopParts, runTakeLoop } from "./take-loop.js";
import { createHeartbeat, createRunner, createScheduler, s3Settings } from "./worker-parts.js";

export type { WorkerStopInfo } from "./lifecycle.js";

/**
 * The worker loop: takes jobs (never more than free slots), runs them, reports every result, and
 * shuts down gracefully. Create it with {@link startWorker}.
 */
export class Worker {
  readonly #config: WorkerConfig;
  readonly #definition: HandlerDefinition;
  readonly #log: Logger;
  readonly #http: PlatformHttp;
  /** Where the handler lives (in-process or isolation threads): its setup, teardown and close. */
  readonly #runner: Runner;
  readonly #heartbeat: Heartbeat | undefined;
  /** The jobs held and the slots: what the take loop, the job-stop poll and shutdown work on. */
  readonly #board: JobBoard;
  /**
   * running → draining → flushing → closed: the worker's signals (taking, polling, giving up), its
   * SIGTERM/SIGINT handlers, and every decision to stop or to end the process (lifecycle.ts).
   */
  readonly #lifecycle: WorkerLifecycle;
  /** The take loop and the health loop: they end when the lifecycle stops taking. */
  #loops: Promise<void>;
  /**
   * The job-stop poll: it ends once the lifecycle is closed, not when it stops taking, so a
   * job-stop sent while running jobs finish up is still seen.
   */
  readonly #stopPoll: Promise<void>;
  /** The shutdown, begun when the lifecycle starts draining; close() returns it. */
  readonly #closed: Promise<void>;
  #resolveStopped!: (info: WorkerStopInfo) => void;
  /** Resolves once the worker has fully stopped (after close(), a signal, or a runaway handler). */
  readonly stopped: Promise<WorkerStopInfo>;
  readonly #events: WorkerEventHub;
  /** The start-up phases before the first take (fitness, ..., setup), and the `ready` report. */
  readonly #phases: StartupPhases;
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
    const heartbeat = createHeartbeat(definition, config, log);
    this.#heartbeat = heartbeat;
    const lifecycle = new WorkerLifecycle({
      log,
      clock: config.clock,
      flushTimeoutMs: config.flushTimeoutMs,
      exitOnHardStop: config.exitOnHardStop,
      handleSignals: config.handleSignals,
      ping: heartbeat,
    });
    this.#lifecycle = lifecycle;
    // A heartbeat thread that dies leaves the worker unable to be seen holding jobs: the platform
    // would lapse them and run them twice. Stop taking, finish what can be finished, report, exit 1.
    void heartbeat?.died.then((reason) => lifecycle.unfit("heartbeat", reason));
    this.#runner = createRunner(definition, config, settings, log, lifecycle);
    // The board's waits, shared with the scheduler: a batch starting grows the room for new jobs.
    const changes = new WaiterSet(config.clock);
    const scheduler = createScheduler(
      definition,
      this.#runner,
      config.clock,
      log,
      {
        runaway: (jobId) => lifecycle.runaway(jobId),
        roomChanged: () => changes.wakeAll(),
      },
      this.#events,
    );
    this.#board = new JobBoard(
      {
        config,
        definition,
        http: this.#http,
        scheduler,
        heartbeat: this.#heartbeat,
        log,
        giveUp: lifecycle.giveUp,
        s3: settings.s3,
        events: this.#events,
        facts: lifecycle,
      },
      lifecycle.taking,
      changes,
    );
    log.info({ workerId: config.podId, isolation: definition.isolation }, "worker started");
    for (const warning of config.warnings) log.warn(warning);
    if (config.urls.stop === undefined) {
      log.warn(
        "the job-take URL has no /job-take/ segment: job-stop is off (the platform cannot stop a running job), and batch takes add batch_size to the job-take URL",
      );
    }
    const loopParts: LoopParts = { config, http: this.#http, log, closing: lifecycle.taking };
    this.#loops = Promise.all([
      this.#takeLoop(loopParts),
      runHealthLoop(definition, log, lifecycle.taking, lifecycle, config.clock),
    ]).then(() => undefined);
    this.#stopPoll = pollJobStops({ ...loopParts, closing: lifecycle.polling }, this.#board);
    this.#closed = lifecycle.draining.then(() => this.#shutdown());
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
      closing: this.#lifecycle.taking,
      clock: this.#config.clock,
    };
    // The fitness phase runs where there is something to check: the built-in checks (on the
    // platform, docs/fitness.md) or the handler's own healthCheck.
    const checks = this.#config.fitnessChecks || this.#definition.healthCheck !== undefined;
    if (checks && !(await phases.run("fitness", () => checkFitness(fitness, this.#lifecycle)))) return;
    // The warm cache, before setup; a failure is a cold start (unfit only under `strict`).
    if (this.#definition.warmCache !== undefined && !(await phases.run("cache", () => this.#hydrate())))
      return;
    // Start-up step 3 (docs/models.md, "Start-up phases"): the sidecars, started and answering.
    if (this.#definition.sidecars.length > 0 && !(await phases.run("sidecar", () => this.#startSidecars())))
      return;
    if (this.#definition.setup !== undefined && !(await phases.run("setup", () => this.#setup()))) return;
    if (this.#lifecycle.taking.aborted) return;
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
    const outcome = await this.#runner.setup({
      closing: this.#lifecycle.taking,
      progress: (text) => {
        this.#log.info({ setupProgress: text }, `setup: ${text}`);
        this.#events.emit("setupProgress", { text });
      },
    });
    if (outcome.ok) return true;
    if (!this.#lifecycle.taking.aborted) this.#lifecycle.unfit(SETUP_CHECK, outcome.reason);
    return false;
  }

  /** Starts the handler's sidecars and waits for them; false when the worker became unfit or closed. */
  async #startSidecars(): Promise<boolean> {
    this.#sidecars = await startSidecars({
      sidecars: this.#definition.sidecars,
      log: this.#log,
      clock: this.#config.clock,
      closing: this.#lifecycle.taking,
      env: this.#env,
      baseEnv: this.#config.sidecarBaseEnv,
      unfit: (check, reason) => this.reportUnfit(check, reason),
      failRunningJobs: (reason) => {
        for (const job of this.#board.jobs()) job.shutdown(reason);
      },
    });
    return this.#sidecars !== undefined;
  }

  /** Hydrates the warm cache (docs/fitness.md, "Warm cache"); false when the worker became unfit. */
  async #hydrate(): Promise<boolean> {
    try {
      // Loaded here: the warm cache's module (file streams, tar) is only for handlers with `warmCache`.
      const { hydrateWarmCache } = await import("../cache/start-cache.js");
      this.#cache = await hydrateWarmCache(
        this.#definition.warmCache,
        this.#log,
        this.#config.endpointId,
        this.#lifecycle.taking,
      );
      return true;
    } catch (err) {
      // Cut short by shutdown (its signal aborts the hydrate): no verdict on the volume.
      if (this.#lifecycle.taking.aborted) return false;
      this.#lifecycle.unfit("cache", err instanceof Error ? err.message : String(err));
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
    this.#lifecycle.unfit(check, reason);
    return this.#closed;
  }

  /**
   * Stops taking jobs, lets running ones finish up to `shutdownGraceMs`, then aborts the rest and
   * reports each as failed, flushes every outbox (up to `flushTimeoutMs`) and releases everything.
   * Idempotent: every call returns the same promise. Does not exit the process.
   */
  close(): Promise<void> {
    this.#lifecycle.close();
    return this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** The shutdown, in the lifecycle's order: draining (the jobs' grace), flushing (reports, teardown, cache), closed. */
  async #shutdown(): Promise<void> {
    const { clock, shutdownGraceMs } = this.#config;
    const lifecycle = this.#lifecycle;
    const closingAt = clock.now();
    try {
      await this.#loops;
      await drainJobs(this.#board, shutdownGraceMs, clock);
      lifecycle.flushing();
      await flushReports(this.#board);
      // The model goes after the jobs that used it, within what is left of the grace.
      await this.#runner.teardown(Math.max(0, shutdownGraceMs - (clock.now() - closingAt)));
      // The last sync, bounded by warmCache.shutdownSyncMs; never throws.
      await this.#cache?.close();
    } finally {
      lifecycle.closed();
      await this.#stopPoll;
      // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
      await lifecycle.unhealthyPing;
      // The sidecars stop after the running jobs (drained above) and the runner's close.
      const steps = [
        this.#runner.close().finally(() => this.#sidecars?.close()),
        this.#heartbeat?.close(),
        this.#http.close(),
        this.#telemetry?.shutdown(),
      ];
      for (const result of await Promise.allSettled(steps)) {
        if (result.status === "rejected") this.#log.warn({ err: result.reason }, "a clean-up step failed");
      }
      const info = lifecycle.info;
      this.#log.info({ reason: info.reason }, "worker stopped");
      this.#resolveStopped(info);
      this.#events.emit("stopped", info);
      // Where the worker owns its process (a signal's shutdown, a runaway handler), it ends here.
      lifecycle.ended();
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
  const telemetry = await loadTelemetry(
    options.telemetry,
    options.env,
    { workerId: config.podId, endpointId: config.endpointId },
    log,
  );
  return new Worker(definition, config, log, options.env, telemetry);
}
