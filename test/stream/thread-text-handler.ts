import { z } from "zod";
import { defineHandler } from "../../src/index.js";

/** `bytes` characters of printable ASCII with nothing JSON escapes, the same for the same size. */
export function plainText(bytes: number): string {
  const unit = "runlet streams plain text 0123456789 ~!#$%&'()*+,-./:;<=>?@[]^_`{|} ";
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

/** A handler module for e2e.test.ts under `isolation: "thread"`: yields one plain string of `bytes` characters. */
export default defineHandler({
  isolation: "thread",
  input: z.object({ bytes: z.number().int() }),
  async *handler({ input }) {
    yield plainText(input.bytes);
  },
});
