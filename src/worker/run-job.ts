import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../clock.js";
import type { HandlerDefinition } from "../handler/define-handler.js";
import { finalBodyText, type JobResult } from "../handler/outcome.js";
import { s3LoadError } from "../optional-peers.js";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobS3, JobS3Options } from "../s3/types.js";
import type { WorkerConfig } from "./config.js";
import type { WorkerEventHub } from "./events.js";
import type { S3Settings } from "./executor.js";
import type { Heartbeat } from "./heartbeat.js";
import type { WorkerFacts } from "./lifecycle.js";
import { type FinalDelivery, JobOutbox } from "./outbox.js";
import type { PlatformHttp } from "./platform-http.js";
import type { Scheduler } from "./scheduler.js";

/**
 * What a job on the main thread is run with, and the small pieces ActiveJob (active-job.ts), the
 * job board, the batch scheduler and the watchdog share: the job's time limit, its outbox, the
 * hard stop, the fitting of its result (offloaded to S3 when too large), the timeout message, the
 * failure body.
 */

/** The worker's parts a job uses, built once by the worker (its `config`, `giveUp` and `s3` also offload outputs). */
export interface JobParts extends OffloadParts {
  readonly definition: HandlerDefinition;
  readonly http: PlatformHttp;
  /** When the job's run starts (plain: at once; a batch handler's: with its batch). */
  readonly scheduler: Scheduler;
  readonly heartbeat: HeartbeatLink | undefined;
  readonly log: Logger;
  /** The worker's lifecycle events (taken, started, progress, finished, failed, retrying). */
  readonly events?: WorkerEventHub;
  /**
   * The worker's lifecycle, told the facts a job finds: its handler ran away (ignored its signal
   * past the grace), threw a WorkerUnfitError (docs/protocol.md, "Unfit workers"), its result asks
   * for a new worker (`stopPod`: the platform replaces this worker, so it takes no further job, as
   * the reference worker does), or its result was lost. The lifecycle decides what follows.
   */
  readonly facts: WorkerFacts;
}

/** What a job tells the heartbeat thread: the job table it pings with, and the watchdog's deadlines. */
export type HeartbeatLink = Pick<Heartbeat, "addJob" | "unlistJob" | "removeJob" | "watch" | "unwatch">;

/** The watchdog fires this long after the main thread's own hard stop, so it acts only when the main thread is stuck. */
export const WATCHDOG_SLACK_MS = 1_000;

/** A job's time limit: a positive integer `policy.executionTimeout`, else the handler's. */
export function jobTimeoutMs(job: DeliveredJob, fallbackMs: number): number {
  const policy = job.policy;
  if (typeof policy === "object" && policy !== null) {
    const value = (policy as { executionTimeout?: unknown }).executionTimeout;
    if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) return value;
  }
  return fallbackMs;
}

/**
 * The error of a job that ran out of time. A string for the watchdog's template (heartbeat.ts's
 * WATCH_TIMEOUT_MARK), which puts the number in on the heartbeat thread.
 */
export function timeoutMessage(timeoutMs: number | string): string {
  return `job timed out after ${timeoutMs} ms (executionTimeout)`;
}

/** The final job-done body for a job the worker fails itself (bad job, extra batch item, watchdog). */
export function failureBody(message: string, stopPod = false): string {
  return finalBodyText({ kind: "error", message, code: "RUNLET_JOB_FAILED", stopPod });
}

/**
 * A job's outbox, wired as every job's is: posts retried on the worker's policy until `giveUp`,
 * and a final result given up on told to the lifecycle as lost. `events` (a job the worker runs)
 * also hears its retries and its report; a job failed unrun passes none.
 */
export function openOutbox(
  jobId: string,
  parts: JobParts,
  log: Logger,
  events?: WorkerEventHub,
): { readonly outbox: JobOutbox; readonly reported: Promise<FinalDelivery> } {
  const { config, http, giveUp, facts } = parts;
  const outbox = new JobOutbox({
    jobId,
    http,
    log,
    giveUp,
    clock: config.clock,
    retry: config.postRetry,
    ...(events === undefined ? {} : { events }),
  });
  const reported = outbox.done.then((delivery) => {
    events?.emit("reported", { jobId, delivery });
    if (delivery === "gave-up") facts.lost(jobId);
    return delivery;
  });
  return { outbox, reported };
}

/** What {@link armHardStop} stops, and what it tells when it cannot. */
export interface HardStopTarget {
  readonly clock: Clock;
  /** The handler's `hardStopGraceMs`. */
  readonly graceMs: number;
  readonly log: Logger;
  /** The error line logged when the grace runs out, with its fields. */
  readonly message: string;
  readonly fields: Record<string, unknown>;
  /** Whether the handler still runs once the grace is over (else nothing happens). */
  stillRuns(): boolean;
  /** Ends it by force; false when its runner cannot (in-process). */
  stop(): Promise<boolean>;
  /** It could not be stopped: the worker must be replaced (the runaway fact). */
  ranAway(): void;
}

/**
 * The hard stop, the one place for a single job (active-job.ts) and a batch (batch-scheduler.ts):
 * `graceMs` after an abort, a handler that still runs is stopped by force, or, where nothing can
 * stop it (in-process), reported as a runaway. Returns the timer (cleared when the run ends).
 */
export function armHardStop(target: HardStopTarget): ClockTimer {
  const { clock, graceMs, log } = target;
  return clock.setTimeout(() => {
    if (!target.stillRuns()) return;
    log.error({ ...target.fields, graceMs }, target.message);
    // Called inside then(): a stop that throws is logged like one that rejects.
    Promise.resolve()
      .then(() => target.stop())
      .then((stopped) => {
        // Stopped: the runner's outcome ("killed") settles the run.
        if (!stopped) target.ranAway();
      })
      .catch((err: unknown) => log.error({ err }, "hard-stopping the handler failed"));
  }, graceMs);
}

/**
 * A final output too large to post (over `maxResultBytes`) goes to S3 when the job or the endpoint
 * names a store, and the job's result becomes `{"s3": <reference>}`; otherwise the job fails
 * saying so. The S3 module (and the AWS SDK behind it) is loaded only then.
 */

/** What offloading reads from the worker. */
export interface OffloadParts {
  /** `maxResultBytes` and the endpoint's BUCKET_* store. */
  readonly config: WorkerConfig;
  /** Aborted at the shutdown flush deadline: ends the upload (and a job's every retry). */
  readonly giveUp: AbortSignal;
  /** ctx.s3's settings, which the offload store uses too. */
  readonly s3: S3Settings;
}

/** `result` as it can be posted: unchanged when it fits, its output offloaded to S3, or an error saying why not. */
export async function fitResult(
  result: JobResult,
  job: DeliveredJob,
  parts: OffloadParts,
  log: Logger,
): Promise<JobResult> {
  if (result.kind !== "output") return result;
  const bytes = Buffer.byteLength(result.json);
  const limit = parts.config.maxResultBytes;
  if (bytes <= limit) return result;
  let s3: JobS3 | undefined;
  try {
    s3 = await createOffloadStore(job, parts, log);
    if (s3?.configured) {
      const ref = await s3.offloadOutput(result.json);
      log.info({ bytes, key: ref.key }, "the output was too large to post; offloaded it to S3");
      return { ...result, json: JSON.stringify({ s3: ref }) };
    }
  } catch (err) {
    return {
      kind: "error",
      message: `the output is ${bytes} bytes, over the ${limit}-byte limit, and offloading it to S3 failed: ${(err as Error).message}`,
      code: "RUNLET_OUTPUT_TOO_LARGE",
      stopPod: result.stopPod,
    };
  } finally {
    await s3?.cleanup().catch((err: unknown) => log.warn({ err }, "S3 cleanup failed"));
  }
  return {
    kind: "error",
    message: `the output is ${bytes} bytes, over the ${limit}-byte limit for a result, and no S3 store is configured to offload it (send s3Config with the job, or set BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint)`,
    code: "RUNLET_OUTPUT_TOO_LARGE",
    stopPod: result.stopPod,
  };
}

async function createOffloadStore(
  job: DeliveredJob,
  parts: OffloadParts,
  log: Logger,
): Promise<JobS3 | undefined> {
  if (job.s3Config === undefined && parts.config.bucket === undefined) return undefined;
  // Loaded here, lazily: the AWS SDK is paid for only when an output is too large.
  const { createJobS3 } = await import("../s3/index.js").catch((err: unknown) => {
    throw s3LoadError(err);
  });
  return createJobS3({
    jobId: job.id,
    s3Config: job.s3Config as JobS3Options["s3Config"],
    bucket: parts.config.bucket,
    signal: parts.giveUp,
    log,
    ...parts.s3,
  });
}
