/** Abortable waiting for the client's polls and retries. */
import { sleep } from "../wait.js";

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as it aborts, so no poll or
 * back-off outlives the caller's interest.
 */
export async function delay(ms: number, signal?: AbortSignal): Promise<void> {
  if (!(await sleep(ms, signal))) throw signal?.reason;
}
