import type { Logger } from "pino";
import type { WarmCache } from "../../cache/warm-cache.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { type RunningSidecars, startSidecars } from "../../sidecar/start-sidecars.js";
import { type BackgroundTasks, settle } from "../../task-sink.js";
import type { WorkerTelemetry, WorkerView } from "../../telemetry/index.js";
import type { WorkerConfig } from "../config.js";
import type { WorkerEventHub } from "../events.js";
import { runHealthLoop } from "../fitness/health.js";
import { checkFitness } from "../fitness/run-fitness.js";
import type { JobBoard } from "../job/job-board.js";
import type { Scheduler } from "../job/scheduler.js";
import { pollJobStops } from "../job/stop-poll.js";
import { runTakeLoop, type TakeLoopDeps } from "../job/take-loop.js";
import {
  Heartbeat,
  type HeartbeatOptions,
  type HeartbeatSlot,
  NULL_SLOT,
  type SlotSource,
} from "../platform/heartbeat.js";
import type { PlatformHttp } from "../platform/platform-http.js";
import type { Runner } from "../runner/runner.js";
import { SETUP_CHECK } from "../runner/setup.js";
import { lazyLbParts } from "./lb-lazy-parts.js";
import type { WorkerLifecycle } from "./lifecycle.js";
import type { WorkerPart } from "./part-list.js";
import { drainJobs, flushReports } from "./shutdown.js";
import { installCrashHandlers, installExitWatch, installSignalHandlers } from "./signals.js";
import { startupBudgetPart } from "./startup-budget-part.js";

/**
 * Each of the worker's long-lived parts as one {@link WorkerPart} (part-list.ts), and
 * {@link composeParts}, their one order. Reversed, it is the stop's order: the take loop ends,
 * the jobs drain (the lifecycle moves to flushing) and their reports flush (it moves to closed),
 * the job-stop poll ends, the runner tears down and ends its threads, the sidecars stop, the warm
 * cache syncs one last time, the health loop ends, the heartbeat sends its last ping and ends,
 * the platform connection closes, telemetry exports, and the signal handlers go.
 */

/** What the parts are made from: the worker's config and the objects it built (nothing started). */
export interface PartsSource {
  readonly definition: HandlerDefinition;
  readonly config: WorkerConfig;
  readonly log: Logger;
  /** The env the worker was started with: sidecars inherit it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly lifecycle: WorkerLifecycle;
  readonly events: WorkerEventHub;
  /** The one sink of the worker's background tasks (task-sink.ts). */
  readonly tasks: BackgroundTasks;
  readonly http: PlatformHttp;
  readonly runner: Runner;
  readonly board: JobBoard;
  /** When runs start (the board's, and the load-balancing server's). */
  readonly scheduler: Scheduler;
  /** The heartbeat part, when the worker has a heartbeat thread (its options were given). */
  readonly heartbeat: HeartbeatPart | undefined;
  readonly telemetry: WorkerTelemetry | undefined;
  /** What telemetry's metrics read from the worker. */
  readonly view: WorkerView;
}

/**
 * The worker's parts in their start order; a part that is not configured is not in the list.
 * `cache` receives the warm cache once hydrated (the worker's `syncWarmCache`).
 */
export function composeParts(source: PartsSource, cache: CachePart | undefined): WorkerPart[] {
  const { definition, config, telemetry, heartbeat } = source;
  const checks = config.fitnessChecks || definition.healthCheck !== undefined;
  if (config.lb !== undefined) {
    // Load-balancing mode (docs/load-balancing.md): requests arrive over HTTP, not from the queue.
    // The port is bound first (health answers 204 through every phase), the request server last.
    const lb = lazyLbParts({ ...source, settings: config.lb, now: () => config.clock.now() });
    const parts: (WorkerPart | undefined)[] = [
      config.handleSignals ? signalsPart(source) : undefined,
      telemetry === undefined ? undefined : telemetryPart(telemetry, source),
      lb.port,
      // The platform's start-up limit holds for a load-balancing worker too (its health stays 204).
      budgetPart(source),
      checks ? fitnessPart(source) : undefined,
      cache,
      definition.sidecars.length > 0 ? sidecarsPart(source) : undefined,
      runnerPart(source),
      lb.server,
    ];
    return parts.filter((part): part is WorkerPart => part !== undefined);
  }
  const parts: (WorkerPart | undefined)[] = [
    config.handleSignals ? signalsPart(source) : undefined,
    telemetry === undefined ? undefined : telemetryPart(telemetry, source),
    platformPart(source.http),
    heartbeat,
    budgetPart(source),
    checks ? fitnessPart(source) : undefined,
    cache,
    definition.sidecars.length > 0 ? sidecarsPart(source) : undefined,
    runnerPart(source),
    stopPollPart(source),
    reportsPart(source),
    jobsPart(source),
    takeLoopPart(source),
  ];
  return parts.filter((part): part is WorkerPart => part !== undefined);
}

/** The start-up budget (docs/fitness.md, "The start-up budget"): ends a phase that runs past it. */
function budgetPart({ config, definition, log, events, lifecycle }: PartsSource): WorkerPart {
  return startupBudgetPart({
    budget: config.startupBudget,
    definition,
    log,
    events,
    unfit: (check, reason) => lifecycle.unfit(check, reason),
  });
}

/** Telemetry: listens to the worker's events from the start; exports its last spans and metrics at the end. */
function telemetryPart(telemetry: WorkerTelemetry, { events, view }: PartsSource): WorkerPart {
  return {
    name: "telemetry",
    start: () => {
      telemetry.attach(events, view);
      return true;
    },
    stop: () => telemetry.shutdown(),
  };
}

/** The platform connection (platform-http.ts): connections open on use; closed last but telemetry. */
function platformPart(http: PlatformHttp): WorkerPart {
  return { name: "platform connection", start: () => true, stop: () => http.close() };
}

/**
 * The heartbeat thread (heartbeat.ts), started first of the worker's own parts: it pings while the
 * start-up phases run (held until ready when the handler has a setup) and watches the jobs' table.
 * It stops after the jobs and their reports, once the unhealthy ping (if any) went out.
 */
export class HeartbeatPart implements WorkerPart, SlotSource {
  readonly name = "heartbeat";
  readonly #options: HeartbeatOptions;
  readonly #lifecycle: WorkerLifecycle;
  #heartbeat: Heartbeat | undefined;

  constructor(options: HeartbeatOptions, lifecycle: WorkerLifecycle) {
    this.#options = options;
    this.#lifecycle = lifecycle;
  }

  start(): boolean {
    const heartbeat = new Heartbeat(this.#options);
    this.#heartbeat = heartbeat;
    // A heartbeat thread that dies leaves the worker unable to be seen holding jobs: the platform
    // would lapse them and run them twice. Stop taking, finish what can be finished, report, exit 1.
    settle(
      heartbeat.died.then((reason) => this.#lifecycle.unfit("heartbeat", reason)),
      (err) => this.#options.log.error({ err }, "watching the heartbeat thread failed"),
    );
    return true;
  }

  ready(): void {
    // Pings held during setup start now, as the Python SDK's start with serverless.start().
    this.#heartbeat?.beginPings();
  }

  async stop(): Promise<void> {
    // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
    await this.#lifecycle.unhealthyPing;
    await this.#heartbeat?.close();
  }

  /** The unhealthy ping (the lifecycle's); nothing before the thread started. */
  unhealthy(check: string, reason: string): Promise<void> {
    return this.#heartbeat?.unhealthy(check, reason) ?? Promise.resolve();
  }

  /** A job's slot in the heartbeat's table (the null slot before the thread started). */
  slot(jobId: string): HeartbeatSlot {
    return this.#heartbeat?.slot(jobId) ?? NULL_SLOT;
  }
}

/**
 * Fitness (docs/fitness.md): the built-in checks and the handler's `healthCheck` before the first
 * take (the `fitness` phase; a worker unfit from the start takes no job), then, with
 * `healthCheckIntervalMs`, the health loop until the worker stops taking.
 */
function fitnessPart({ definition, config, log, lifecycle, tasks }: PartsSource): WorkerPart {
  let loop: Promise<void> = Promise.resolve();
  return {
    name: "fitness checks",
    phase: "fitness",
    start: (signal) =>
      checkFitness(
        {
          definition,
          config: config.fitness,
          builtIn: config.fitnessChecks,
          log,
          closing: signal,
          clock: config.clock,
        },
        lifecycle,
      ),
    ready: () => {
      loop = tasks.run("health loop", () =>
        runHealthLoop(definition, log, lifecycle.taking, lifecycle, config.clock),
      );
    },
    stop: () => loop,
  };
}

/**
 * The warm cache (docs/fitness.md, "Warm cache"): hydrated before setup (the `cache` phase; a
 * failure is a cold start, unfit only under `strict`); once ready, what setup produced is sent to
 * the volume in the background (the worker's task sink hears its failure); a last sync at stop,
 * bounded by `warmCache.shutdownSyncMs`.
 */
export class CachePart implements WorkerPart {
  readonly name = "warm cache";
  readonly phase = "cache";
  readonly #source: Pick<PartsSource, "definition" | "config" | "log" | "lifecycle" | "tasks">;
  #cache: WarmCache | undefined;
  /** The sync the worker's readiness starts (the worker's tasks own it: it never rejects). */
  #readySync: Promise<void> | undefined;

  constructor(source: Pick<PartsSource, "definition" | "config" | "log" | "lifecycle" | "tasks">) {
    this.#source = source;
  }

  /** The cache, once hydrated. */
  get cache(): WarmCache | undefined {
    return this.#cache;
  }

  async start(signal: AbortSignal): Promise<boolean> {
    const { definition, config, log, lifecycle } = this.#source;
    try {
      // Loaded here: the warm cache's module (file streams, tar) is only for handlers with `warmCache`.
      const { hydrateWarmCache } = await import("../../cache/start-cache.js");
      // The hydrate leaves the fitness `disk` threshold free (RUNPOD_MIN_DISK_PERCENT).
      this.#cache = await hydrateWarmCache(definition.warmCache, log, config.endpointId, signal, {
        minDiskPercent: config.fitness.minDiskPercent,
      });
      return true;
    } catch (err) {
      // Cut short by shutdown (its signal aborts the hydrate): no verdict on the volume.
      if (signal.aborted) return false;
      lifecycle.unfit("cache", err instanceof Error ? err.message : String(err));
      return false;
    }
  }

  ready(): void {
    const cache = this.#cache;
    // After setup: send what setup produced to the volume, without delaying the first take.
    if (cache !== undefined) this.#readySync = this.#source.tasks.run("warm cache sync", () => cache.sync());
  }

  async stop(): Promise<void> {
    // The ready-time sync (it never rejects: the worker's tasks own it), then the last sync,
    // bounded by warmCache.shutdownSyncMs; never throws.
    await this.#readySync;
    await this.#cache?.close();
  }
}

/** The handler's sidecars (docs/models.md, "Sidecars"): started and answering before setup; stopped after the runner. */
function sidecarsPart({ definition, config, log, env, lifecycle, board }: PartsSource): WorkerPart {
  let sidecars: RunningSidecars | undefined;
  return {
    name: "sidecars",
    phase: "sidecar",
    start: async (signal) => {
      sidecars = await startSidecars({
        sidecars: definition.sidecars,
        log,
        clock: config.clock,
        closing: signal,
        env,
        baseEnv: config.sidecarBaseEnv,
        unfit: async (check, reason) => lifecycle.unfit(check, reason),
        failRunningJobs: (reason) => {
          for (const job of board.jobs()) job.shutdown(reason);
        },
      });
      return sidecars !== undefined;
    },
    stop: () => sidecars?.close(),
  };
}

/**
 * The runner (runner/runner.ts, runner/thread-runner.ts): where the handler lives. Its start runs `setup`
 * there — in-process, or in the first isolation thread, which it spawns only now — after fitness,
 * cache and sidecars (the `setup` phase when the handler has one; a failure makes the worker
 * unfit with `check=setup`). Its stop runs `teardown` within what is left of the grace, then ends
 * its threads.
 */
function runnerPart({ definition, config, log, lifecycle, events, runner }: PartsSource): WorkerPart {
  return {
    name: "runner",
    ...(definition.setup === undefined ? {} : { phase: "setup" as const }),
    start: async (signal) => {
      const outcome = await runner.start({
        closing: signal,
        progress: (text) => {
          log.info({ setupProgress: text }, `setup: ${text}`);
          events.emit("setupProgress", { text });
        },
      });
      if (outcome.ok) return true;
      if (!signal.aborted) lifecycle.unfit(SETUP_CHECK, outcome.reason);
      return false;
    },
    stop: async (deadline) => {
      try {
        // The model goes after the jobs that used it, within what is left of the grace.
        await runner.teardown(Math.max(0, deadline - config.clock.now()));
      } finally {
        await runner.close();
      }
    },
  };
}

/**
 * The job-stop poll (stop-poll.ts): it stops after the jobs and their reports, not when the
 * worker stops taking, so a job-stop sent while running jobs finish up is still seen.
 */
function stopPollPart({ config, http, log, board, tasks }: PartsSource): WorkerPart {
  const polling = new AbortController();
  let poll: Promise<void> = Promise.resolve();
  return {
    name: "job-stop poll",
    start: () => {
      poll = tasks.run("job-stop poll", () =>
        pollJobStops({ config, http, log, closing: polling.signal }, board),
      );
      return true;
    },
    stop: async () => {
      polling.abort();
      await poll;
    },
  };
}

/**
 * The jobs held (job-board.ts): nothing to start; its stop drains them (shutdown.ts: running jobs
 * get the grace, then are aborted and reported as failed), and ends in the lifecycle's `flushing`.
 */
function jobsPart({ board, config }: PartsSource): WorkerPart {
  return {
    name: "jobs",
    endsIn: "flushing",
    start: () => true,
    stop: (deadline) =>
      drainJobs(board, Math.max(0, deadline - config.clock.now()), config.shutdownGraceMs, config.clock),
  };
}

/**
 * The jobs' reports (each job's outbox): nothing to start; its stop waits for their posts, which
 * go on until the lifecycle's flush deadline gives them up, and ends in the lifecycle's `closed`.
 */
function reportsPart({ board }: PartsSource): WorkerPart {
  return {
    name: "reports",
    endsIn: "closed",
    start: () => true,
    stop: () => flushReports(board),
  };
}

/**
 * SIGTERM/SIGINT and the last-resort handler (signals.ts), where the worker owns its process
 * (`handleSignals`): installed first, so a signal during any start-up phase is heard; removed
 * last, once every other part has stopped.
 */
export function signalsPart({ lifecycle, log }: Pick<PartsSource, "lifecycle" | "log">): WorkerPart {
  let remove: (() => void) | undefined;
  return {
    name: "signals",
    start: () => {
      const removeSignals = installSignalHandlers(log, {
        first: () => lifecycle.signal(),
        second: () => lifecycle.exitNow(),
      });
      const removeCrash = installCrashHandlers((err, origin) => lifecycle.crash(err, origin));
      // A handler's process.exit(): one fatal line naming the jobs in flight, a non-zero exit.
      const removeExitWatch = installExitWatch(
        () => lifecycle.exiting,
        (code) => lifecycle.foreignExit(code),
      );
      remove = () => {
        removeSignals();
        removeCrash();
        removeExitWatch();
      };
      return true;
    },
    stop: () => {
      remove?.();
      remove = undefined;
    },
  };
}

/** The take loop (take-loop.ts): takes its first job once the worker is ready; ends when it stops taking. */
function takeLoopPart({ config, http, log, lifecycle, board, tasks }: PartsSource): WorkerPart {
  let loop: Promise<void> = Promise.resolve();
  return {
    name: "take loop",
    start: () => true,
    ready: () => {
      const parts: TakeLoopDeps = { config, http, log, closing: lifecycle.taking };
      // The loop never throws; were it to, the worker could take nothing more: unfit, not silent.
      loop = tasks.run("take loop", () => runTakeLoop(parts, board), { unfit: "take-loop" });
    },
    stop: () => loop,
  };
}
