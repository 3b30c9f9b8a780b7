import { defineHandler } from "runlet";
import { z } from "zod";

/**
 * A CPU-bound handler under `isolation: "thread"`: each job runs in a worker thread, so the main
 * thread keeps taking jobs and the heartbeat keeps pinging while it computes. The deadline is
 * enforced even on a loop that never yields: past `executionTimeoutMs` (or the job's
 * `policy.executionTimeout`) plus the grace period, runlet terminates the thread and the job
 * fails with RUNLET_JOB_TIMEOUT.
 */

const input = z.object({
  /** Count the primes below this number. */
  below: z.number().int().min(2).max(50_000_000),
  /** Ignore the deadline on purpose (a synchronous loop that never checks its signal). */
  ignoreSignal: z.boolean().default(false),
});

/** Counts primes below `n` with trial division; checks `signal` every 10 000 numbers unless told not to. */
function countPrimes(n: number, signal: AbortSignal | undefined): number {
  let count = 0;
  for (let candidate = 2; candidate < n; candidate++) {
    if (signal !== undefined && candidate % 10_000 === 0) signal.throwIfAborted();
    let prime = true;
    for (let d = 2; d * d <= candidate; d++) {
      if (candidate % d === 0) {
        prime = false;
        break;
      }
    }
    if (prime) count++;
  }
  return count;
}

export default defineHandler({
  input,
  isolation: "thread",
  concurrency: 2,
  executionTimeoutMs: 60_000,
  hardStopGraceMs: 1_000,
  handler({ input, signal, metrics, deadline }) {
    metrics.set("budgetMs", Math.max(0, deadline - Date.now()));
    const primes = countPrimes(input.below, input.ignoreSignal ? undefined : signal);
    return { below: input.below, primes };
  },
});
