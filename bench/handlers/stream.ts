import { defineHandler } from "../../src/index.js";

/**
 * The bench's streaming handler. `{ items: N }` yields N short strings (a token stream);
 * `{ bytes: N }` yields one string of N bytes (split into ≤ 1 MiB chunks on the way out).
 * BENCH_COALESCE_MS turns on `streamCoalesceMs` for the coalesced variant.
 */
const streamCoalesceMs = Number(process.env["BENCH_COALESCE_MS"] ?? "0");

export default defineHandler({
  streamCoalesceMs,
  async *handler({ input }) {
    const { items, bytes } = input as { items?: number; bytes?: number };
    if (typeof bytes === "number") {
      yield "x".repeat(bytes);
      return;
    }
    for (let i = 0; i < (items ?? 0); i++) yield `tok${i} `;
  },
});
