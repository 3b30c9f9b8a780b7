import { setTimeout as sleep } from "node:timers/promises";

/** How long {@link waitFor} waits by default: long enough for a loaded machine, short of the test's 30 s. */
export const WAIT_FOR_MS = 15_000;

/**
 * Polls `check` every 20 ms until it returns (or resolves to) something other than undefined or
 * false, and returns that. Throws after `timeoutMs` with `what` in the message, so a test that
 * waits in vain says what it waited for instead of dying at vitest's timeout. A check that throws
 * ends the wait with its error (a child that exited early, say).
 */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
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
