/** Abortable waiting and back-off arithmetic for the client's polls and 429 retries. */
import { sleep } from "../wait.js";

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as it aborts, so no poll or
 * back-off outlives the caller's interest.
 */
export async function delay(ms: number, signal?: AbortSignal): Promise<void> {
  if (!(await sleep(ms, signal))) throw signal?.reason;
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
