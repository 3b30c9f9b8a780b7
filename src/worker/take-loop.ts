import type { Logger } from "pino";
import { withLinkedSignal } from "../linked-signal.js";
import { backoffMs } from "../retry-policy.js";
import { sleep } from "../wait.js";
import { EMPTY_PAUSE } from "./backoff.js";
import type { WorkerConfig } from "./config.js";
import type { JobBoard } from "./job-board.js";
import type { PlatformHttp } from "./platform-http.js";
import { take } from "./take.js";

/**
 * The take loop (docs/protocol.md, "Taking jobs"): asks for as many jobs as there are free slots (job-take, or
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

/** What the worker's long-running loops (this one and the job-stop poll) work with. */
export interface LoopParts {
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Aborted when the worker stops taking (close, a signal, unfitness): ends the loop and its long poll. */
  readonly closing: AbortSignal;
}

/**
 * The part of the worker's {@link JobBoard} the take loop uses. A `Pick` of the class, not an
 * interface of its own, so go-to-definition lands on JobBoard's methods; only the signal-leak test
 * (test/worker/signal-leak.test.ts) passes another: an empty board, to drive the loop alone.
 */
export type TakeLoopBoard = Pick<JobBoard, "size" | "consultConcurrency" | "waitForChange" | "admit">;

/** Runs until `closing` aborts; the jobs of each answer go to `board.admit`. */
export async function runTakeLoop(
  { config, http, log, closing }: LoopParts,
  board: TakeLoopBoard,
): Promise<void> {
  let faults = 0;
  let instantEmpties = 0;
  while (!closing.aborted) {
    const running = board.size;
    const free = board.consultConcurrency() - running;
    if (free <= 0) {
      await board.waitForChange(CONCURRENCY_RECHECK_MS);
      continue;
    }
    const url = config.urls.take(free, running > 0);
    let answer: Awaited<ReturnType<typeof take>>;
    // On the worker's clock, like the pause itself: a ManualClock that stands still counts every
    // empty answer as instant, so a test sees each pause and moves the clock past it.
    const sentAt = config.clock.now();
    try {
      answer = await withLinkedSignal(closing, config.takeTimeoutMs, (signal) =>
        take(http, url, signal, free),
      );
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
      board.admit(answer.jobs, answer.bad, free);
    }
  }
}
