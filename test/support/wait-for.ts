import { setTimeout as sleep } from "node:timers/promises";

/** How long {@link waitFor} waits by default: long enough for a loaded machine, short of the test's 30 s. */
export const WAIT_FOR_MS = 15_000;

/**
 * Polls `check` every 20 ms until it returns something other than undefined or false, and returns
 * that (a promise is a value like any other: returned, not awaited). Throws after `timeoutMs` with
 * `what` in the message, so a test that waits in vain says what it waited for instead of dying at
 * vitest's timeout. A check that throws ends the wait with its error (a child that exited early,
 * say). {@link waitForAsync} takes a check whose answer must be awaited.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false,
  timeoutMs = WAIT_FOR_MS,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** {@link waitFor} for a check that answers asynchronously (an HTTP request, say): its answer is awaited. */
export async function waitForAsync<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = WAIT_FOR_MS,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Lets pending promise callbacks and I/O callbacks run. */
export const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
