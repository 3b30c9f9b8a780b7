import type { Clock } from "./clock.js";
import { onAbort } from "./linked-signal.js";

/** A timer on `clock`, or a plain Node timer without one. */
function setTimer(clock: Clock | undefined, fn: () => void, ms: number): { clear(): void } {
  if (clock === undefined) {
    const handle = setTimeout(fn, ms);
    return { clear: () => clearTimeout(handle) };
  }
  const timer = clock.setTimeout(fn, ms);
  return { clear: () => clock.clearTimeout(timer) };
}

/**
 * Waiting, shared by the worker, the job-API client and the management client: a sleep that an
 * AbortSignal cuts short (so shutdown never sits out an interval) and the `Retry-After` header.
 * Each caller keeps its own back-off policy; these two pieces are the same everywhere.
 */

/**
 * Resolves after `ms`, or early (with false) when `signal` aborts; true when the full time passed.
 * `clock` (the worker's, replaceable in tests) times it; @default real timers.
 */
export function sleep(ms: number, signal?: AbortSignal, clock?: Clock): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimer(
      clock,
      () => {
        unsubscribe?.();
        resolve(true);
      },
      ms,
    );
    // One listener on the signal however many sleeps share it (a worker's jobs back off on one
    // give-up signal): a listener each would trip MaxListenersExceededWarning under load.
    const unsubscribe =
      signal === undefined
        ? undefined
        : onAbort(signal, () => {
            timer.clear();
            resolve(false);
          });
  });
}

/** Options of {@link retryAfterMs}. */
export interface RetryAfterOptions {
  /** The current time, for an HTTP-date value. @default Date.now() */
  readonly nowMs?: number;
  /** Largest wait returned, ms. @default no cap */
  readonly capMs?: number;
}

/**
 * The wait a `Retry-After` header asks for, in ms: delta-seconds or an HTTP date (RFC 9110 §10.2.3);
 * undefined when absent or unreadable, so the caller falls back to its own back-off.
 */
export function retryAfterMs(
  header: string | readonly string[] | undefined,
  options: RetryAfterOptions = {},
): number | undefined {
  const value = (typeof header === "string" ? header : header?.[0])?.trim();
  if (value === undefined || value === "") return undefined;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(value)) ms = Math.round(Number(value) * 1_000);
  else {
    // An HTTP date names its day and month; without a letter it is garbage that Date.parse
    // would still read (e.g. "-3" as a year).
    const at = /[a-z]/i.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - (options.nowMs ?? Date.now()));
  }
  return options.capMs === undefined ? ms : Math.min(options.capMs, ms);
}
