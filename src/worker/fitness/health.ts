import type { Logger } from "pino";
import { type Clock, type ClockTimer, realClock } from "../../clock.js";
import { RunletError } from "../../errors.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { DEFAULT_CHECK_NAME, healthCheckFailure, type Unfitness } from "../../handler/unfit.js";
import { onAbort } from "../../linked-signal.js";
import { sleep } from "../../wait.js";
import type { WorkerFacts } from "../facts.js";

/**
 * Runs a handler's `healthCheck` once (docs/protocol.md, "Unfit workers": a worker that finds itself unfit pings
 * unhealthy and exits 1). The worker calls it before its first take and, with
 * `healthCheckIntervalMs`, periodically; the unhealthy ping and the exit are the worker's.
 */

const TIMED_OUT: unique symbol = Symbol("timed out");
const CLOSED: unique symbol = Symbol("closed");

/**
 * Resolves with the unfitness the check found, or undefined when it passed (or had no check, or the
 * worker closed meanwhile: a check cut short by shutdown says nothing about fitness). Never rejects.
 */
export async function runHealthCheck(
  definition: HandlerDefinition,
  log: Logger,
  closing: AbortSignal,
  clock: Clock = realClock(),
): Promise<Unfitness | undefined> {
  const check = definition.healthCheck;
  if (check === undefined || closing.aborted) return undefined;
  const timeoutMs = definition.healthCheckTimeoutMs;
  // The check's signal fires on shutdown or at its timeout; linked through onAbort (one listener
  // on `closing`, gone with its last callback), not AbortSignal.any, which leaks on Node 20.
  const own = new AbortController();
  const signal = own.signal;
  let timer: ClockTimer | undefined;
  let unsubscribe: (() => void) | undefined;
  try {
    const outcome = await Promise.race([
      // Called inside then(): a check that throws synchronously is a rejection like any other.
      Promise.resolve().then(() => check({ signal, log })),
      new Promise<typeof TIMED_OUT>((resolve) => {
        timer = clock.setTimeout(() => resolve(TIMED_OUT), timeoutMs);
      }),
      new Promise<typeof CLOSED>((resolve) => {
        unsubscribe = onAbort(closing, () => {
          own.abort(closing.reason);
          resolve(CLOSED);
        });
      }),
    ]);
    if (outcome === CLOSED) return undefined;
    if (outcome === TIMED_OUT) {
      const reason = `the health check did not finish within ${timeoutMs} ms (healthCheckTimeoutMs)`;
      own.abort(new RunletError("RUNLET_WORKER_UNFIT", reason));
      return { check: DEFAULT_CHECK_NAME, reason };
    }
    if (outcome === false) return { check: DEFAULT_CHECK_NAME, reason: "the health check returned false" };
    log.debug("health check passed");
    return undefined;
  } catch (err) {
    if (closing.aborted) return undefined;
    return healthCheckFailure(err);
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
    unsubscribe?.();
  }
}

/**
 * Runs the handler's health check once; a failure is reported to the lifecycle as unfitness.
 * False when it failed.
 */
export async function checkHealth(
  definition: HandlerDefinition,
  log: Logger,
  closing: AbortSignal,
  facts: Pick<WorkerFacts, "unfit">,
  clock?: Clock,
): Promise<boolean> {
  const unfit = await runHealthCheck(definition, log, closing, clock);
  if (unfit === undefined) return true;
  facts.unfit(unfit.check, unfit.reason);
  return false;
}

/**
 * With `healthCheckIntervalMs`, runs {@link checkHealth} every interval while the worker runs;
 * ends at the first failure (the worker is then stopping) or when `closing` aborts.
 */
export async function runHealthLoop(
  definition: HandlerDefinition,
  log: Logger,
  closing: AbortSignal,
  facts: Pick<WorkerFacts, "unfit">,
  clock?: Clock,
): Promise<void> {
  const { healthCheck, healthCheckIntervalMs } = definition;
  if (healthCheck === undefined || healthCheckIntervalMs === 0) return;
  while (await sleep(healthCheckIntervalMs, closing, clock)) {
    if (!(await checkHealth(definition, log, closing, facts, clock))) return;
  }
}
