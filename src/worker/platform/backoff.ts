/**
 * The worker's retry policies (src/retry-policy.ts holds the rule and the one back-off formula):
 * results are posted until delivered, and the job-take and job-stop polls back off after faults.
 */
import { type RetryPolicy, retryPolicy } from "../../retry-policy.js";

/** The longest `Retry-After` the worker honours on its polls, ms; a longer one is cut to this. */
export const MAX_RETRY_AFTER_MS = 60_000;

/** The bounds a worker's options set: `retryBaseMs`, `retryCapMs`. */
export interface WorkerRetryBounds {
  readonly retryBaseMs: number;
  readonly retryCapMs: number;
}

/**
 * Posting a result, progress or chunk: every network error, 429 and 5xx is retried until it is
 * delivered or shutdown's flush deadline gives up; a `Retry-After` is honoured up to 4 × the cap.
 */
export function postRetryPolicy(bounds: WorkerRetryBounds): RetryPolicy {
  return retryPolicy({
    statuses: new Set([429]),
    refusedStatuses: new Set([429]),
    allServerErrors: true,
    errorCodes: new Set(["*"]),
    baseMs: bounds.retryBaseMs,
    capMs: bounds.retryCapMs,
    jitter: 0.5,
    longRetryAfter: "cap",
    maxRetryAfterMs: bounds.retryCapMs * 4,
    maxRetries: Number.POSITIVE_INFINITY,
  });
}

/** The job-take and job-stop polls after a fault: the same back-off, and they never stop. */
export function pollRetryPolicy(bounds: WorkerRetryBounds): RetryPolicy {
  return retryPolicy(postRetryPolicy(bounds), { maxRetryAfterMs: MAX_RETRY_AFTER_MS });
}

/** The pause after instant empty answers: jittered, doubling per repeat from 100 ms to 1 s, reset by a job or a held poll. */
export const EMPTY_PAUSE: RetryPolicy = postRetryPolicy({ retryBaseMs: 100, retryCapMs: 1_000 });

/**
 * The heartbeat thread's last posts (the watchdog's job reports, the one unhealthy ping): the
 * process ends soon after either way, so a few quick retries, network errors, 429 and 5xx, a
 * `Retry-After` cut to the cap. {@link watchdogPostRetry} allows 4 retries, {@link unhealthyPingRetry} 2.
 */
const LAST_POST_RETRY: RetryPolicy = retryPolicy({
  statuses: new Set([429]),
  refusedStatuses: new Set([429]),
  allServerErrors: true,
  errorCodes: new Set(["*"]),
  baseMs: 200,
  capMs: 1_000,
  jitter: 0.5,
  longRetryAfter: "cap",
  maxRetryAfterMs: 1_000,
  maxRetries: 4,
});

/** The watchdog's report of a job held past its time: 5 attempts in all. */
export const watchdogPostRetry: RetryPolicy = LAST_POST_RETRY;

/** The unhealthy ping: 3 attempts in all. */
export const unhealthyPingRetry: RetryPolicy = retryPolicy(LAST_POST_RETRY, { maxRetries: 2 });
