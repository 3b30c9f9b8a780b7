/**
 * The timing and retry options both API clients take — the job client (src/client) and the
 * management client (src/management): a per-request timeout and the retry bounds their policies
 * are built from. Checked and defaulted here, once, the same way for both; each client keeps its
 * own defaults, its timeout option's name and its policy's shape.
 */
import { z } from "zod";
import { durationOption, integerOption, parseOptions } from "./option-schema.js";
import type { RetryPolicy } from "./retry-policy.js";

/** The retry options both clients take. */
export interface RetryLimitOptions {
  /** Retries after the first attempt. */
  readonly maxRetries?: number;
  /** First back-off bound, in ms; it doubles per attempt. */
  readonly retryBaseMs?: number;
  /** Longest back-off, in ms. */
  readonly retryCapMs?: number;
}

/** One client's defaults, and the name its per-request timeout option has there. */
export interface CallLimitDefaults {
  readonly timeoutName: "requestTimeoutMs" | "timeoutMs";
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly retryBaseMs: number;
  readonly retryCapMs: number;
}

/** What a client's options resolve to: its per-request timeout and its retry policy's bounds. */
export interface CallLimits {
  readonly timeoutMs: number;
  readonly retry: Pick<RetryPolicy, "maxRetries" | "baseMs" | "capMs">;
}

/**
 * A resolver for one client's timing and retry options (build it once, call it per client): left
 * out means the default; a bad value fails with `RUNLET_CONFIG_INVALID`, naming the option, what
 * was expected and what came (``maxRetries must be an integer ≥ 0, got -1``).
 *
 * @example
 * const limitsOf = callLimitsResolver({ timeoutName: "timeoutMs", timeoutMs: 30_000, maxRetries: 4, retryBaseMs: 500, retryCapMs: 30_000 });
 * const { timeoutMs, retry } = limitsOf(options);
 */
export function callLimitsResolver(
  defaults: CallLimitDefaults,
): (options: RetryLimitOptions & Partial<Record<CallLimitDefaults["timeoutName"], number>>) => CallLimits {
  const schema = z.object({
    [defaults.timeoutName]: durationOption(1, defaults.timeoutMs),
    maxRetries: integerOption(0, defaults.maxRetries),
    retryBaseMs: durationOption(0, defaults.retryBaseMs),
    retryCapMs: durationOption(0, defaults.retryCapMs),
  });
  return (options) => {
    const numbers = parseOptions(
      schema,
      {
        [defaults.timeoutName]: options[defaults.timeoutName],
        maxRetries: options.maxRetries,
        retryBaseMs: options.retryBaseMs,
        retryCapMs: options.retryCapMs,
      },
      "RUNLET_CONFIG_INVALID",
    ) as Record<string, number>;
    return Object.freeze({
      timeoutMs: numbers[defaults.timeoutName]!,
      retry: Object.freeze({
        maxRetries: numbers["maxRetries"]!,
        baseMs: numbers["retryBaseMs"]!,
        capMs: numbers["retryCapMs"]!,
      }),
    });
  };
}
