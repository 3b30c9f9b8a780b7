/**
 * The one retry loop (undici's RetryHandler is the model): an attempt, then, while the attempt
 * failed in a way worth asking about, the caller's retry decision (its RetryPolicy through
 * `nextRetry`, src/retry-policy.ts), a wait on the injectable clock, and the next attempt — until an attempt ends the
 * send, the decision says stop, or the bounding signal aborts. The worker's outbox, the job
 * client's transport and the management client's transport each send through it; what an
 * attempt is, and what a stop returns or throws, stay theirs.
 */
import type { Clock } from "./clock.js";
import type { AttemptOutcome, RetryVerdict } from "./retry-policy.js";
import { sleep } from "./wait.js";

/**
 * What one attempt ended with: `done` ends the send with that value (a success, or a failure no
 * policy could change); `failed` asks the retry decision, and `otherwise` gives the send's value
 * (or throws) when the decision is to stop.
 */
export type AttemptResult<T> =
  | { readonly done: T }
  | { readonly failed: AttemptOutcome; readonly otherwise: () => T };

/** A retry about to wait: what failed, which attempt (0-based) and how long the wait is. */
export interface RetryNotice {
  readonly attempt: number;
  readonly delayMs: number;
  readonly failed: AttemptOutcome;
}

/** Options of {@link sendWithRetry}. */
export interface SendWithRetryOptions<T> {
  /** Makes attempt number `attempt` (0-based) and says how it ended; a throw ends the send. */
  readonly attempt: (attempt: number) => Promise<AttemptResult<T>>;
  /** After failed attempt `attempt`: whether and when to try again (e.g. `nextRetry(policy, …)`). */
  readonly retry: (attempt: number, failed: AttemptOutcome) => RetryVerdict;
  /**
   * Bounds the whole send: checked before every attempt, and it ends a wait between attempts at
   * once. A caller's own abort, or the worker's give-up.
   */
  readonly signal?: AbortSignal | undefined;
  /** The send's value once `signal` has aborted (return it, or throw). @default throws the signal's reason */
  readonly aborted?: () => T;
  /** Told before each wait: log it, emit an event. */
  readonly onRetry?: (notice: RetryNotice) => void;
  /** Times the waits. @default real timers */
  readonly clock?: Clock | undefined;
}

/**
 * Sends with retries: attempt, ask, wait, attempt again. Nothing outlives it: each wait is the
 * one abortable sleep (src/wait.ts), its timer and listener gone when it ends.
 *
 * @example
 * const body = await sendWithRetry({
 *   attempt: async () => {
 *     const res = await request(url, { signal });
 *     if (res.statusCode < 300) return { done: await res.body.text() };
 *     return { failed: { status: res.statusCode, headers: res.headers }, otherwise: () => { throw new Error("refused"); } };
 *   },
 *   retry: (attempt, failed) => nextRetry(policy, attempt, failed),
 *   signal,
 * });
 */
export async function sendWithRetry<T>(options: SendWithRetryOptions<T>): Promise<T> {
  const { signal } = options;
  for (let attempt = 0; ; attempt++) {
    if (signal?.aborted) {
      if (options.aborted !== undefined) return options.aborted();
      throw signal.reason;
    }
    const result = await options.attempt(attempt);
    if ("done" in result) return result.done;
    const verdict = options.retry(attempt, result.failed);
    if (!verdict.retry) return result.otherwise();
    options.onRetry?.({ attempt, delayMs: verdict.delayMs, failed: result.failed });
    // An abort ends the wait early; the loop's top then ends the send.
    await sleep(verdict.delayMs, signal, options.clock);
  }
}
