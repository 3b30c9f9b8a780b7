import { defineHandler } from "runlet";
import { z } from "zod";

/**
 * The smallest useful handler: echoes its input back, optionally in upper case, and reports one
 * progress update. `npm run dev` serves it against the local harness.
 */
export default defineHandler({
  input: z.object({
    text: z.string().default("hello"),
    upper: z.boolean().default(false),
  }),
  concurrency: 4,
  handler: ({ input, progress, log, metrics }) => {
    progress({ received: input.text.length });
    metrics.set("characters", input.text.length);
    log.info({ upper: input.upper }, "echoing");
    return { echo: input.upper ? input.text.toUpperCase() : input.text };
  },
});
