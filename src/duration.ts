/**
 * The ceiling of every duration runlet accepts, and the one check of it (docs/reliability.md,
 * "Durations"). No imports: the worker's hot paths and its threads read the constant without
 * loading the option schemas.
 */

/**
 * The longest delay a Node timer keeps, in ms: 2³¹−1, about 24.8 days. A longer one fires after
 * 1 ms (with a TimeoutOverflowWarning), so a duration option above it would end a wait at once,
 * blaming a limit it never reached: every duration option is refused above it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * What a duration option in ms must be, when `value` is not that (undefined when it is): an
 * integer ≥ `min` and ≤ {@link MAX_TIMER_MS}. The one check behind `duration` (option-schema.ts) and the
 * hand-written option checkers (sidecars, downloads), so every duration says the same limit.
 *
 * @example
 * durationProblem(2_592_000_000, 1) // "at most 2147483647 ms (2^31−1, about 24.8 days: the longest timer Node keeps)"
 */
export function durationProblem(value: unknown, min: number): string | undefined {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) return `an integer ≥ ${min}`;
  if (value > MAX_TIMER_MS) {
    return `at most ${MAX_TIMER_MS} ms (2^31−1, about 24.8 days: the longest timer Node keeps)`;
  }
  return undefined;
}
