import { defineHandler } from "runlet";
import { z } from "zod";

/** What a job's `input` must look like. runlet checks it before the handler runs. */
const input = z.object({
  name: z.string().min(1).max(200),
  greeting: z.string().max(50).default("Hello"),
});

export default defineHandler({
  input,
  async handler({ input, log }) {
    log.info({ name: input.name }, "greeting");
    return { message: `${input.greeting}, ${input.name}!` };
  },
});
