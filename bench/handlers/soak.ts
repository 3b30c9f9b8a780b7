import { monitorEventLoopDelay } from "node:perf_hooks";
import { defineHandler } from "../../src/index.js";

/**
 * The real-time soak's handler (bench/figures/soak.ts): short, streaming, failing and cancelled
 * jobs, and a probe that answers the worker process's RSS, heap in use after a full GC (with
 * --expose-gc), open handles and the event loop's p99 delay since the last probe.
 */
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();

type Kind = "short" | "stream" | "fail" | "cancel" | "probe";

export default defineHandler({
  concurrency: 8,
  handler: async function* ({ input, signal }) {
    const { kind } = input as { kind: Kind };
    if (kind === "probe") {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      // With no delay recorded since the last probe, percentile() answers a placeholder, not a delay.
      if (delay.count === 0) throw new Error("the soak probe came before any event-loop delay was recorded");
      const p99Ms = delay.percentile(99) / 1e6;
      delay.reset();
      yield {
        rssBytes: process.memoryUsage().rss,
        heapUsedBytes: gc === undefined ? null : process.memoryUsage().heapUsed,
        handles: process.getActiveResourcesInfo().length,
        loopDelayP99Ms: p99Ms,
      };
      return;
    }
    if (kind === "fail") throw new Error("a soak job that fails on purpose");
    if (kind === "cancel") {
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      return;
    }
    const items = kind === "stream" ? 20 : 1;
    for (let i = 0; i < items; i++) yield { i };
  },
});
