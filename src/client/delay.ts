/** Abortable waiting and back-off arithmetic for the client's polls and 429 retries. */

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as it aborts, so no poll or
 * back-off outlives the caller's interest. The timer is cleared either way.
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The wait a `Retry-After` header asks for, in ms: delta-seconds or an HTTP date; undefined when
 * absent or unreadable (the caller then uses its own back-off).
 */
export function retryAfterMs(
  header: string | string[] | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1_000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** Capped exponential back-off with full jitter: a random wait in [base, min(cap, base·2^attempt)]. */
export function backoffMs(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** attempt);
  return Math.round(baseMs + random() * Math.max(0, ceiling - baseMs));
}
