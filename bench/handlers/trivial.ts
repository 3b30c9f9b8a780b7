import { defineHandler } from "../../src/index.js";

/**
 * The bench's trivial handler: echoes `input.n` and says how long it ran, so per-job overhead can
 * subtract the handler's own time. Concurrency comes from BENCH_CONCURRENCY (a bench-only knob:
 * one file serves every concurrency level). `{ probe: true }` answers the process's heap in use
 * after a full garbage collection (when Node runs with --expose-gc), for the memory figures.
 */
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? "1");

export default defineHandler({
  concurrency,
  handler: ({ input }) => {
    const started = performance.now();
    const { n, probe } = input as { n?: unknown; probe?: unknown };
    if (probe === true) {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      return { heapUsedBytes: gc === undefined ? null : process.memoryUsage().heapUsed };
    }
    return { n: n ?? null, handlerMs: performance.now() - started };
  },
});
