import type { Logger } from "pino";
import type { CacheRun } from "../cache/warm-cache.js";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import { createLogger } from "../log/index.js";
import { BackgroundTasks } from "../task-sink.js";
import { loadTelemetry, type WorkerTelemetry } from "../telemetry/index.js";
import { WaiterSet } from "../wait.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { WorkerEventHub, type WorkerEvents, type WorkerListener } from "./events.js";
import { JobBoard } from "./job/job-board.js";
import { WorkerLifecycle, type WorkerStopInfo } from "./lifecycle/lifecycle.js";
import { PartList } from "./lifecycle/part-list.js";
import { CachePart, composeParts, HeartbeatPart, type PartsSource } from "./lifecycle/parts.js";
import { StartupPhases } from "./lifecycle/startup-phases.js";
import { createRunner, createScheduler, heartbeatOptions, s3Settings } from "./lifecycle/worker-parts.js";
import { PlatformHttp } from "./platform/platform-http.js";
import type { RunnerSettings } from "./runner/runner.js";

export type { WorkerStopInfo } from "./lifecycle/lifecycle.js";

/**
 * The worker loop: takes jobs (never more than free slots), runs them, reports every result, and
 * shuts down gracefully. Create it with {@link startWorker}. Its long-lived parts are one ordered
 * list (parts.ts, `composeParts`): the lifecycle starts it forward until ready and stops it in
 * reverse (part-list.ts); the constructor builds the parts and starts none ({@link Worker.start}
 * does, which {@link startWorker} calls).
 */
export class Worker {
  readonly #config: WorkerConfig;
  readonly #log: Logger;
  /** The jobs held and the slots: what the take loop, the job-stop poll and shutdown work on. */
  readonly #board: JobBoard;
  /**
   * running → draining → flushing → closed: the worker's signals (taking, giving up), its
   * SIGTERM/SIGINT handlers, and every decision to stop or to end the process (lifecycle.ts).
   */
  readonly #lifecycle: WorkerLifecycle;
  /** The worker's parts in order: started forward until ready, stopped in reverse. */
  readonly #parts: PartList;
  /** The start of the parts, once {@link start} was called (resolves false when the worker did not become ready). */
  #started: Promise<boolean> | undefined;
  /** The shutdown, begun when the lifecycle starts draining; close() returns it. */
  readonly #closed: Promise<void>;
  #resolveStopped!: (info: WorkerStopInfo) => void;
  /** Resolves once the worker has fully stopped (after close(), a signal, or a runaway handler). */
  readonly stopped: Promise<WorkerStopInfo>;
  readonly #events: WorkerEventHub;
  /** The warm cache's part, when the handler has `warmCache` (its cache once hydrated). */
  readonly #cache: CachePart | undefined;
  /** The one sink of the worker's background tasks (task-sink.ts). */
  readonly #tasks: BackgroundTasks;

  /** @internal use {@link startWorker}. */
  constructor(
    definition: HandlerDefinition,
    config: WorkerConfig,
    log: Logger,
    env: Readonly<Record<string, string | undefined>> = {},
    telemetry?: WorkerTelemetry,
  ) {
    this.#config = config;
    this.#log = log;
    this.#events = new WorkerEventHub(log);
    const phases = new StartupPhases(this.#events, log);
    this.stopped = new Promise((resolve) => {
      this.#resolveStopped = resolve;
    });
    const http = new PlatformHttp(config.apiKey, config.connect);
    const settings: RunnerSettings = {
      identity: { hostname: config.hostname, workerId: config.podId },
      bucket: config.bucket,
      s3: s3Settings(config, definition),
    };
    let heartbeat: HeartbeatPart | undefined;
    const lifecycle = new WorkerLifecycle({
      log,
      clock: config.clock,
      flushTimeoutMs: config.flushTimeoutMs,
      exitOnHardStop: config.exitOnHardStop,
      handleSignals: config.handleSignals,
      ping: { unhealthy: (check, reason) => heartbeat?.unhealthy(check, reason) ?? Promise.resolve() },
      jobsInFlight: () => this.#board?.ids() ?? [],
    });
    this.#lifecycle = lifecycle;
    const runner = createRunner(definition, config, settings, log, lifecycle);
    // A load-balancing worker has no platform to ping or report to (docs/load-balancing.md).
    const beat =
      config.mode === "lb" ? undefined : heartbeatOptions(definition, config, log, runner.canHardStop);
    heartbeat = beat === undefined ? undefined : new HeartbeatPart(beat, lifecycle);
    this.#tasks = new BackgroundTasks({ log, unfit: (check, reason) => lifecycle.unfit(check, reason) });
    // The board's waits, shared with the scheduler: a batch starting grows the room for new jobs.
    const changes = new WaiterSet(config.clock);
    const scheduler = createScheduler(
      definition,
      runner,
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
        http,
        scheduler,
        heartbeat,
        log,
        giveUp: lifecycle.giveUp,
        s3: settings.s3,
        events: this.#events,
        facts: lifecycle,
      },
      lifecycle.taking,
      changes,
    );
    const source: PartsSource = {
      definition,
      config,
      log,
      env,
      lifecycle,
      events: this.#events,
      tasks: this.#tasks,
      http,
      runner,
      board: this.#board,
      scheduler,
      heartbeat,
      telemetry,
      view: this,
    };
    this.#cache = definition.warmCache === undefined ? undefined : new CachePart(source);
    this.#parts = new PartList(composeParts(source, this.#cache), phases, log, (part) =>
      lifecycle.partStopped(part),
    );
    log.info({ workerId: config.podId, isolation: definition.isolation }, "worker started");
    for (const warning of config.warnings) log.warn(warning);
    if (config.mode === "queue" && config.urls.stop === undefined) {
      log.warn(
        "the job-take URL has no /job-take/ segment: job-stop is off (the platform cannot stop a running job), and batch takes add batch_size to the job-take URL",
      );
    }
    this.#closed = lifecycle.draining.then(() => this.#shutdown());
  }

  /**
   * Starts the parts in order (docs/worker.md, "Start-up phases"; an unfit part stops the rest),
   * once: a second call returns the same promise. It resolves once the start is under way; the
   * parts start one turn later, so a listener added as {@link startWorker} resolves sees every
   * start-up event. The `ready` event says the worker is ready; `stopped`, that it stopped.
   */
  start(): Promise<void> {
    this.#started ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
      this.#parts.start(this.#lifecycle.taking),
    );
    return Promise.resolve();
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

  /** @internal The worker's parts' names, in start order (docs/architecture.md, "The worker's parts, declared once"). */
  get parts(): readonly string[] {
    return this.#parts.names;
  }

  /**
   * Sends the warm cache's new files to the network volume now (docs/fitness.md, "Warm cache"), e.g.
   * after a job compiled a kernel; undefined without `warmCache` or before it was hydrated.
   *
   * @example
   * worker.on("finished", () => void worker.syncWarmCache());
   */
  syncWarmCache(): Promise<CacheRun | undefined> {
    const cache = this.#cache?.cache;
    return cache === undefined ? Promise.resolve(undefined) : cache.sync();
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

  /**
   * The shutdown: the parts stop in reverse (the jobs' grace, their reports, teardown, ... the
   * platform connection), each by the end of the grace; then the lifecycle is closed and, where
   * the worker owns its process, ends it.
   */
  async #shutdown(): Promise<void> {
    const { clock, shutdownGraceMs } = this.#config;
    const deadline = clock.now() + shutdownGraceMs;
    const lifecycle = this.#lifecycle;
    try {
      // The starts in flight end first: each was given the taking signal, aborted now.
      await this.#started;
      await this.#parts.stop(deadline);
    } finally {
      const info = lifecycle.info;
      this.#log.info({ reason: info.reason }, "worker stopped");
      this.#resolveStopped(info);
      this.#events.emit("stopped", info);
      // Closed by the reports part's stop (or here, for a start cut short before it); where the
      // worker owns its process (a signal's shutdown, a runaway handler), it ends here.
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
  const worker = new Worker(definition, config, log, options.env, telemetry);
  await worker.start();
  return worker;
}
