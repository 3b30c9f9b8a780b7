/**
 * Waiting between attempts: capped exponential back-off with full jitter, `Retry-After`, and a
 * sleep that any AbortSignal cuts short (so shutdown never sits out an interval).
 */

/** Back-off bounds, in ms. */
export interface BackoffOptions {
  /** First delay's upper bound. @default 250 */
  readonly baseMs?: number;
  /** Largest delay. @default 15_000 */
  readonly capMs?: number;
}

/** The delay before retry number `attempt` (0-based): uniform in [bound/2, bound], bound = min(cap, base·2^attempt). */
export function backoffDelayMs(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 250;
  const cap = options.capMs ?? 15_000;
  const bound = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  return Math.round(bound / 2 + Math.random() * (bound / 2));
}

/** `Retry-After` (seconds or an HTTP date) in ms, capped at `capMs`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, capMs = 60_000): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(capMs, Math.round(seconds * 1000));
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.min(capMs, Math.max(0, date - Date.now()));
}

/** Resolves after `ms`, or early (with false) when `signal` aborts; true when the full time passed. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
