import { z } from "zod";
import { defineHandler } from "../../src/index.js";

/** A handler module for refresh-per-job.unit.test.ts under `isolation: "thread"`: asks for a new worker when told to. */
export default defineHandler({
  isolation: "thread",
  input: z.object({ text: z.string(), wedged: z.boolean().default(false) }),
  handler: (ctx) => {
    if (ctx.input.wedged) ctx.refreshWorker();
    return { text: ctx.input.text.toUpperCase() };
  },
});
