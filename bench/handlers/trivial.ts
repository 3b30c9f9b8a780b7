import { defineHandler } from "../../src/index.js";

/**
 * The bench's trivial handler: echoes `input.n` and says how long it ran, so per-job overhead can
 * subtract the handler's own time. Concurrency comes from BENCH_CONCURRENCY (a bench-only knob:
 * one file serves every concurrency level).
 */
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? "1");

export default defineHandler({
  concurrency,
  handler: ({ input }) => {
    const started = performance.now();
    const n = (input as { n?: unknown }).n ?? null;
    return { n, handlerMs: performance.now() - started };
  },
});
