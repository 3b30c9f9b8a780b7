import type { Logger } from "pino";
import type { HandlerDefinition } from "../../handler/define-handler.js";

/**
 * A handler's concurrency: a fixed number, or a function of the current value that the take loop
 * consults between takes. A bad answer never changes the worker's concurrency and never stops it:
 * it is logged and the current value is kept. Changing it never waits for running jobs to drain.
 */

/** The concurrency a worker starts with: the number, or 1 until the function is first consulted. */
export function initialConcurrency(concurrency: HandlerDefinition["concurrency"]): number {
  return typeof concurrency === "number" ? concurrency : 1;
}

/**
 * The concurrency to use from now on: `concurrency(current)` when it is a function returning an
 * integer ≥ 1, else `current` (a throw or a bad return is logged with what came back).
 */
export function nextConcurrency(
  concurrency: HandlerDefinition["concurrency"],
  current: number,
  log: Logger,
): number {
  if (typeof concurrency !== "function") return current;
  let next: unknown;
  try {
    next = concurrency(current);
  } catch (err) {
    log.error({ err }, "the concurrency function threw; keeping the current value");
    return current;
  }
  if (typeof next !== "number" || !Number.isSafeInteger(next) || next < 1) {
    log.error(
      { got: String(next) },
      `concurrency function must return an integer ≥ 1, got ${String(next)}; keeping ${current}`,
    );
    return current;
  }
  if (next !== current) log.info({ from: current, to: next }, "concurrency changed");
  return next;
}
