import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import { HANDLER_DEFAULTS, type HandlerDefinition } from "../../handler/define-handler.js";
import type { WorkerConfig } from "../config.js";
import type { WorkerEventHub } from "../events.js";
import { BatchScheduler } from "../job/batch-scheduler.js";
import { failureBody } from "../job/failure-body.js";
import { timeoutMessage } from "../job/job-clock.js";
import { PlainScheduler, type Scheduler } from "../job/scheduler.js";
import {
  type HeartbeatOptions,
  WATCH_ID_MARK,
  WATCH_TIMEOUT_MARK,
  type WatchdogReport,
} from "../platform/heartbeat.js";
import { InProcessRunner, type Runner, type RunnerSettings, type S3Settings } from "../runner/runner.js";
import { defaultThreadEntryUrl, ThreadRunner } from "../runner/thread-runner.js";

/**
 * The long-lived parts a worker assembles from its config and handler once, at start: where jobs
 * run (in-process or isolation threads), the heartbeat thread, and ctx.s3's settings.
 */

/** ctx.s3's settings: a worker option wins over the handler's, then runlet's default. */
export function s3Settings(config: WorkerConfig, definition: HandlerDefinition): S3Settings {
  return Object.freeze({
    allowPrivateAddresses:
      config.allowPrivateAddresses ??
      definition.allowPrivateAddresses ??
      HANDLER_DEFAULTS.allowPrivateAddresses,
    presignExpiresSec:
      config.presignExpiresSec ?? definition.presignExpiresSec ?? HANDLER_DEFAULTS.presignExpiresSec,
    tmpRoot: config.tmpRoot,
  });
}

/**
 * Where `definition`'s handler lives: in-process, or isolation threads. A thread whose handler
 * does not load or whose setup fails reports it to `reports.unfit`.
 */
export function createRunner(
  definition: HandlerDefinition,
  config: WorkerConfig,
  settings: RunnerSettings,
  log: Logger,
  reports: Pick<RunReports, "unfit">,
): Runner {
  return definition.isolation === "thread"
    ? threadRunner(definition, config, settings, log, reports)
    : new InProcessRunner(definition, settings, log, config.clock);
}

/**
 * When `definition`'s runs start: a plain handler's jobs at once, a batch handler's in batches
 * its BatchScheduler fills (scheduler.ts).
 */
export function createScheduler(
  definition: HandlerDefinition,
  runner: Runner,
  clock: Clock,
  log: Logger,
  reports: Pick<RunReports, "runaway" | "roomChanged">,
  events?: WorkerEventHub,
): Scheduler {
  if (definition.batch === undefined) return new PlainScheduler(runner);
  return new BatchScheduler({
    definition,
    runner,
    clock,
    log,
    runaway: (jobId) => reports.runaway(jobId),
    roomChanged: () => reports.roomChanged(),
    ...(events === undefined ? {} : { wrapBatch: (run, start) => events.wrapBatch(run, start) }),
  });
}

/** What the runner and the scheduler report to the worker (the worker's lifecycle decides what follows). */
export interface RunReports {
  /** A place cannot serve jobs: the handler did not load in a thread, or a thread's setup failed. */
  unfit(check: string, reason: string): void;
  /** An in-process batch ignored its aborted signal past the grace. */
  runaway(jobId: string): void;
  /** The room for new jobs may have grown without a job ending (a batch started). */
  roomChanged(): void;
}

function threadRunner(
  definition: HandlerDefinition,
  config: WorkerConfig,
  settings: RunnerSettings,
  log: Logger,
  reports: Pick<RunReports, "unfit">,
): ThreadRunner {
  return new ThreadRunner({
    entryUrl: config.threadEntry ?? defaultThreadEntryUrl(),
    handlerModule: config.threadEntry === undefined ? config.handlerModule : undefined,
    log: {
      platform: config.endpointId !== undefined,
      level: log.level,
      secrets: config.apiKey ? [config.apiKey] : [],
    },
    settings,
    logger: log,
    onUnfit: (check, reason) => reports.unfit(check, reason),
    clock: config.clock,
    setup: { present: definition.setup !== undefined, timeoutMs: definition.setupTimeoutMs },
  });
}

/**
 * The heartbeat thread's options: it pings when the platform gave a ping URL, a key and a pod id (docs/protocol.md, "Heartbeat"), and
 * watches for a stuck main thread when the runner cannot hard-stop a run (`canHardStop` false:
 * in-process) and the worker may exit for it (`exitOnHardStop`). Undefined when it has neither
 * job (the heartbeat is then not a part).
 */
export function heartbeatOptions(
  definition: HandlerDefinition,
  config: WorkerConfig,
  log: Logger,
  canHardStop: boolean,
): HeartbeatOptions | undefined {
  if (config.pingUrl !== undefined && config.apiKey !== undefined && !config.onPlatformPod) {
    // As the platform's Python SDK: no pod id means not on the platform, so nobody to ping; jobs are still taken.
    log.info(
      "RUNPOD_POD_ID is not set, so this worker is not running on the platform: it sends no heartbeat pings, and takes jobs under a generated id",
    );
  }
  const pingUrl = config.apiKey === undefined || !config.onPlatformPod ? undefined : config.urls.ping;
  const watchdog: WatchdogReport | undefined =
    config.exitOnHardStop && !canHardStop
      ? {
          doneUrl: config.urls.done(WATCH_ID_MARK, false),
          streamDoneUrl: config.urls.done(WATCH_ID_MARK, true),
          failureBody: failureBody(timeoutMessage(WATCH_TIMEOUT_MARK), definition.refreshWorker),
          endedBody: failureBody(
            "the worker ended: a job held the main thread past its deadline, and the watchdog ended the process",
            definition.refreshWorker,
          ),
        }
      : undefined;
  if (pingUrl === undefined && watchdog === undefined) return undefined;
  return {
    pingUrl,
    intervalMs: config.pingIntervalMs,
    apiKey: config.apiKey,
    watchdog,
    // As the Python SDK with a model loaded at import: no ping before setup is done.
    holdPings: definition.setup !== undefined,
    log,
    clock: config.clock,
    ...(config.heartbeatEntry === undefined ? {} : { entryUrl: config.heartbeatEntry }),
  };
}
