import { defineHandler } from "../../src/index.js";

/**
 * The coalescing-window bench's handler (bench/coalesce-window.ts): `{ items, gapMs }` yields
 * `items` short tokens, each carrying the wall-clock time it was yielded (`<ms>;`), waiting
 * `gapMs` between them (0: as fast as it can, a generator that never waits). BENCH_COALESCE_MS
 * sets `streamCoalesceMs`.
 */
const streamCoalesceMs = Number(process.env["BENCH_COALESCE_MS"] ?? "0");

const now = () => performance.timeOrigin + performance.now();

export default defineHandler({
  streamCoalesceMs,
  async *handler({ input }) {
    const { items, gapMs } = input as { items: number; gapMs: number };
    for (let i = 0; i < items; i++) {
      if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      yield `${now().toFixed(2)};`;
    }
  },
});
