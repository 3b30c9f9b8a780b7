import type { Logger } from "pino";
import { withLinkedSignal } from "../linked-signal.js";
import type { DeliveredJob } from "../protocol/index.js";
import { backoffMs } from "../retry-policy.js";
import { sleep } from "../wait.js";
import { EMPTY_PAUSE } from "./backoff.js";
import type { WorkerConfig } from "./config.js";
import { type FinalDelivery, JobOutbox } from "./outbox.js";
import type { PlatformHttp } from "./platform-http.js";
import { doneUrl, failureBody } from "./run-job.js";
import { type BadJob, take } from "./take.js";

/**
 * The take loop (worker-protocol §2): asks for as many jobs as there are free slots (job-take, or
 * job-take-batch for more than one), with an exact `job_in_progress`, and handles every answer:
 * none, 429 (wait), faults (capped jittered back-off), jobs (admitted, never more than asked for).
 */

/** How long to wait on a 429 without Retry-After (the reference worker's figure). */
export const SLOW_DOWN_MS = 5_000;
/**
 * An empty answer (204, empty 200, 400) faster than this is "instant": the server did not hold the
 * long poll (fast-boot workers get 400 at once), so the loop pauses before asking again.
 */
export const INSTANT_EMPTY_MS = 1_000;
/** While every slot is busy, a concurrency function is consulted at least this often. */
const CONCURRENCY_RECHECK_MS = 1_000;

/** The worker's side of the loop. */
export interface TakeLoopDeps {
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Aborted when the worker stops taking (close, a signal, unfitness): ends the loop and its long poll. */
  readonly closing: AbortSignal;
  /** The handler's health check, run once before the first take; false when the worker is unfit. */
  readonly checkHealth: () => Promise<boolean>;
  /** Consults the concurrency (between takes) and returns the current value. */
  readonly concurrency: () => number;
  /** Jobs this worker holds (running or still being reported). */
  readonly running: () => number;
  /** Waits until a slot or the job list changes, `ms` passes, or the worker closes. */
  readonly waitForChange: (ms: number) => Promise<void>;
  /** Admits the jobs of one answer; `free` is how many the take asked for. */
  readonly accept: (jobs: DeliveredJob[], bad: readonly BadJob[], free: number) => void;
}

/** Runs until `closing` aborts (or the first health check fails). */
export async function runTakeLoop(deps: TakeLoopDeps): Promise<void> {
  const { config, http, log, closing } = deps;
  // §7: a worker unfit from the start takes no job at all.
  if (!(await deps.checkHealth())) return;
  let faults = 0;
  let instantEmpties = 0;
  while (!closing.aborted) {
    const running = deps.running();
    const free = deps.concurrency() - running;
    if (free <= 0) {
      await deps.waitForChange(CONCURRENCY_RECHECK_MS);
      continue;
    }
    const url = config.urls.take(free, running > 0);
    let answer: Awaited<ReturnType<typeof take>>;
    // On the worker's clock, like the pause itself: a ManualClock that stands still counts every
    // empty answer as instant, so a test sees each pause and moves the clock past it.
    const sentAt = config.clock.now();
    try {
      answer = await withLinkedSignal(closing, config.takeTimeoutMs, (signal) => take(http, url, signal));
    } catch {
      // Our own long-poll cap or shutdown aborted the request: no job was handed over.
      continue;
    }
    if (answer.kind === "none") {
      faults = 0;
      if (config.clock.now() - sentAt < INSTANT_EMPTY_MS) {
        // Without a pause an instant answer makes the loop spin (hundreds of takes a second).
        await sleep(backoffMs(EMPTY_PAUSE, instantEmpties++), closing, config.clock);
      } else instantEmpties = 0;
    } else if (answer.kind === "slow-down") {
      log.warn({ waitMs: answer.waitMs ?? SLOW_DOWN_MS }, "job-take answered 429; waiting");
      await sleep(answer.waitMs ?? SLOW_DOWN_MS, closing, config.clock);
    } else if (answer.kind === "fault") {
      const waitMs = backoffMs(config.pollRetry, faults++);
      log.warn({ reason: answer.reason, waitMs }, "job-take failed; backing off");
      await sleep(waitMs, closing, config.clock);
    } else {
      faults = 0;
      instantEmpties = 0;
      deps.accept(answer.jobs, answer.bad, free);
    }
  }
}

/** What admitting jobs needs from the worker. */
export interface AdmitDeps {
  readonly log: Logger;
  readonly isRunning: (jobId: string) => boolean;
  readonly start: (job: DeliveredJob) => void;
  /** Reports a job the worker will not run, so it is not left IN_PROGRESS. */
  readonly failUnrun: (jobId: string, reason: string) => void;
}

/**
 * Starts the delivered jobs, at most `free` of them: bad ones are logged and failed, a copy of a
 * job already running is ignored, and jobs beyond what the take asked for are failed unrun.
 */
export function admitJobs(jobs: DeliveredJob[], bad: readonly BadJob[], free: number, deps: AdmitDeps): void {
  const { log } = deps;
  for (const item of bad) {
    log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: item.id }, item.reason);
    if (item.id !== undefined) deps.failUnrun(item.id, item.reason);
  }
  let room = free;
  for (const job of jobs) {
    if (deps.isRunning(job.id)) {
      log.error(
        { code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id },
        "the platform delivered a job this worker is already running; ignoring the copy",
      );
      continue;
    }
    if (room <= 0) {
      const reason = `the platform delivered more jobs than the ${free} this worker asked for; this job was not run (retry it)`;
      log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id }, reason);
      deps.failUnrun(job.id, reason);
      continue;
    }
    room -= 1;
    deps.start(job);
  }
}

/** What {@link reportUnrun} posts with. */
export interface UnrunDeps {
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Aborting it ends the report's retries (the shutdown flush deadline). */
  readonly giveUp: AbortSignal;
}

/** Fails a job the worker will not run with `{error: reason}`, through its own outbox (retried like any result). */
export function reportUnrun(jobId: string, reason: string, deps: UnrunDeps): Promise<FinalDelivery> {
  const { config } = deps;
  const outbox = new JobOutbox({
    jobId,
    http: deps.http,
    log: deps.log.child({ requestId: jobId }),
    giveUp: deps.giveUp,
    clock: config.clock,
    retry: config.postRetry,
  });
  outbox.final(doneUrl(config, jobId, false), failureBody(reason), false);
  return outbox.done;
}
