/**
 * Retry as data (undici's RetryHandler is the model): one policy says which answers and which
 * network errors are worth another attempt, how long to wait between attempts, how a
 * `Retry-After` header is honoured and when to stop. The worker's outbox and takes, the job
 * client and the management client each build one from their own defaults and ask
 * {@link nextRetry} after every failed attempt; no caller decides inline or computes a back-off.
 */
import { retryAfterMs } from "./wait.js";

/** Network error codes retried by default: the connection broke or never came up. */
export const NETWORK_ERROR_CODES: readonly string[] = [
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED",
];

/** A retry policy: plain, frozen data. */
export interface RetryPolicy {
  /** Statuses worth another attempt (e.g. 429, 502, 503, 504). */
  readonly statuses: ReadonlySet<number>;
  /**
   * The subset of {@link statuses} that prove the server did nothing with the request (429: it
   * refused before reading it), so even a request that is not safe to repeat may be sent again
   * when its caller says so (`retryable: "when-refused"`).
   */
  readonly refusedStatuses: ReadonlySet<number>;
  /** Also retry every status ≥ 500 (the worker's posts: the platform may be restarting). */
  readonly allServerErrors: boolean;
  /** Error codes (`err.code`, or its cause's) worth another attempt; `"*"` retries any network error. */
  readonly errorCodes: ReadonlySet<string>;
  /** First back-off bound, in ms; it doubles per attempt. */
  readonly baseMs: number;
  /** Largest back-off bound, in ms. */
  readonly capMs: number;
  /**
   * Share of the bound that is random: 0 waits exactly the bound, 0.5 waits in [bound/2, bound],
   * 1 waits in [0, bound].
   */
  readonly jitter: number;
  /** What a `Retry-After` longer than {@link maxRetryAfterMs} does: wait that long instead, or stop. */
  readonly longRetryAfter: "cap" | "give-up";
  /** Longest `Retry-After` honoured, in ms. */
  readonly maxRetryAfterMs: number;
  /** Retries after the first attempt; `Infinity` retries until the caller's signal ends it. */
  readonly maxRetries: number;
}

/** What a failed attempt ended with: an answer's status and headers, or a thrown error. */
export type AttemptOutcome =
  | { readonly status: number; readonly headers?: Readonly<Record<string, string | string[] | undefined>> }
  | { readonly error: unknown };

/** {@link nextRetry}'s verdict: wait `delayMs` and try again, or stop (and why). */
export type RetryVerdict =
  | { readonly retry: true; readonly delayMs: number }
  | {
      readonly retry: false;
      readonly reason: "not-retryable" | "not-safe" | "exhausted" | "retry-after-too-long";
    };

/**
 * Whether a request may be sent again. `true`: repeating it cannot lose or duplicate anything (a
 * status read). `"when-refused"`: only after an answer that proves the server did nothing (a
 * `/stream` read, which consumes chunks once served). `false`: never (a create, a `run`).
 */
export type Retryable = boolean | "when-refused";

/** Creates a frozen policy from `defaults` with `overrides` on top. */
export function retryPolicy(defaults: RetryPolicy, overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  return Object.freeze({ ...defaults, ...overrides });
}

/** The back-off before retry number `attempt` (0-based), without `Retry-After`. */
export function backoffMs(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const bound = Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(bound * (1 - policy.jitter * random()));
}

/** The error code of a network failure: `err.code`, else its cause's. */
export function errorCodeOf(error: unknown): string | undefined {
  for (let e = error, depth = 0; typeof e === "object" && e !== null && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** True when `outcome` is one the policy retries (ignoring attempts and safety). */
export function isRetryable(policy: RetryPolicy, outcome: AttemptOutcome): boolean {
  if ("error" in outcome) {
    if (policy.errorCodes.has("*")) return true;
    const code = errorCodeOf(outcome.error);
    return code !== undefined && policy.errorCodes.has(code);
  }
  return policy.statuses.has(outcome.status) || (policy.allServerErrors && outcome.status >= 500);
}

/** Options of {@link nextRetry}. */
export interface NextRetryOptions {
  /** Whether the request may be sent again (see {@link Retryable}). @default true */
  readonly retryable?: Retryable;
  /** The current time, for an HTTP-date `Retry-After`. @default Date.now() */
  readonly nowMs?: number;
  /** Source of jitter in [0, 1). @default Math.random */
  readonly random?: () => number;
}

/** Decides, after failed attempt number `attempt` (0-based), whether and when to try again. */
export function nextRetry(
  policy: RetryPolicy,
  attempt: number,
  outcome: AttemptOutcome,
  options: NextRetryOptions = {},
): RetryVerdict {
  if (!isRetryable(policy, outcome)) return { retry: false, reason: "not-retryable" };
  const retryable = options.retryable ?? true;
  if (retryable === false) return { retry: false, reason: "not-safe" };
  if (retryable === "when-refused" && !("status" in outcome && policy.refusedStatuses.has(outcome.status))) {
    return { retry: false, reason: "not-safe" };
  }
  if (attempt >= policy.maxRetries) return { retry: false, reason: "exhausted" };
  const asked =
    "status" in outcome
      ? retryAfterMs(
          outcome.headers?.["retry-after"],
          options.nowMs === undefined ? {} : { nowMs: options.nowMs },
        )
      : undefined;
  if (asked !== undefined) {
    if (asked <= policy.maxRetryAfterMs) return { retry: true, delayMs: asked };
    if (policy.longRetryAfter === "give-up") return { retry: false, reason: "retry-after-too-long" };
    return { retry: true, delayMs: policy.maxRetryAfterMs };
  }
  return { retry: true, delayMs: backoffMs(policy, attempt, options.random) };
}
