import { MAX_TIMER_MS } from "../../duration.js";
import type { DeliveredJob } from "../../protocol/index.js";

/**
 * A job's time limit and what its end by time says: the limit (`policy.executionTimeout`, else the
 * handler's), the timeout's message, and the watchdog's slack behind the main thread's hard stop.
 */

/** The watchdog fires this long after the main thread's own hard stop, so it acts only when the main thread is stuck. */
export const WATCHDOG_SLACK_MS = 1_000;

/**
 * A job's time limit: a positive integer `policy.executionTimeout`, else the handler's. One past
 * the longest timer (the platform's own limit is 7 days) is held to it: a longer timer fires at once.
 */
export function jobTimeoutMs(job: DeliveredJob, fallbackMs: number): number {
  const policy = job.policy;
  if (typeof policy === "object" && policy !== null) {
    const value = (policy as { executionTimeout?: unknown }).executionTimeout;
    if (typeof value === "number" && Number.isSafeInteger(value) && value > 0)
      return Math.min(value, MAX_TIMER_MS);
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
