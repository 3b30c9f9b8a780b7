import { setTimeout as sleep } from "node:timers/promises";
import { defineHandler } from "runlet";
import { z } from "zod";

/**
 * A long job that reports progress: each `progress()` call posts an IN_PROGRESS update to the
 * platform (docs/protocol.md, "Results") while the job runs. Updates are delivered in order and always
 * before the final result.
 */

const input = z.object({
  steps: z.number().int().min(1).max(1000).default(5),
  /** Time each step takes, in ms. */
  stepMs: z.number().int().min(0).max(60_000).default(50),
});

export default defineHandler({
  input,
  async handler({ input, signal, progress, log }) {
    for (let step = 1; step <= input.steps; step++) {
      await sleep(input.stepMs, undefined, { signal });
      progress({ step, of: input.steps, percent: Math.round((step / input.steps) * 100) });
      log.debug({ step }, "step done");
    }
    return { steps: input.steps, done: true };
  },
});
