import { setTimeout as sleep } from "node:timers/promises";
import { defineHandler } from "runlet";
import { z } from "zod";

/**
 * Dynamic concurrency: instead of a fixed number, `concurrency` is a function runlet calls
 * between job-takes with the current value; what it returns is how many jobs this worker runs at
 * once from then on. Here the worker ramps up one slot at a time to a ceiling read once from the
 * environment, the way a GPU worker might grow its batch while memory allows.
 */

/** The most jobs at once, from RUNLET_MAX_CONCURRENCY (read once, at load). */
const ceiling = (() => {
  const raw = Number(process.env["RUNLET_MAX_CONCURRENCY"] ?? "4");
  return Number.isInteger(raw) && raw >= 1 ? raw : 4;
})();

/** Grows by one slot each time runlet asks, up to the ceiling. Must return an integer ≥ 1. */
export function nextConcurrency(current: number): number {
  return Math.min(ceiling, current + 1);
}

const input = z.object({
  workMs: z.number().int().min(0).max(60_000).default(100),
});

let running = 0;

export default defineHandler({
  input,
  concurrency: nextConcurrency,
  async handler({ input, signal }) {
    running++;
    // How many jobs this worker held when this one started: a client can see the ramp-up.
    const concurrentAtStart = running;
    try {
      await sleep(input.workMs, undefined, { signal });
      return { concurrentAtStart };
    } finally {
      running--;
    }
  },
});
