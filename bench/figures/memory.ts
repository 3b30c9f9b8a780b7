import type { Harness } from "../../dist/harness/index.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, connectWorker, runJobs, settle } from "../session.js";
import { type Figure, figure, repeat } from "../stats.js";

const MiB = 1_048_576;
/** Jobs are queued this many at a time, so the harness's queue is not what is measured. */
const BATCH = 1_000;

/** Asks the trivial handler for the worker's heap in use after a forced GC. */
async function heapUsed(harness: Harness): Promise<number> {
  const job = await harness.waitForJob(harness.enqueue("local", { input: { probe: true } }));
  const value = (job.output as { heapUsedBytes?: number | null } | undefined)?.heapUsedBytes;
  if (typeof value !== "number") throw new Error("the worker did not report its heap (is --expose-gc set?)");
  return value;
}

/**
 * Memory of a fresh worker process: RSS when idle (connected, no job yet), after a warm-up of
 * `memory.warmupJobs` trivial jobs, and after `memory.jobs` more, and the heap in use after a
 * forced GC half-way and at the end. The warm-up is a one-time step (the worker loads undici's Pool
 * once it is idle after a job, about 9 MiB) reported apart from the growth that the bound holds.
 * RSS grows while V8 and the allocator warm up and then levels off (60 000 jobs on 2026-11-27:
 * 88 MiB idle, 113 MiB at 10 000 jobs and 112–114 MiB from there to 60 000); a per-job leak shows
 * as heap growth over the second half.
 */
export async function measureMemory(
  options: BenchOptions,
): Promise<{ figures: Figure[]; withinBound: boolean }> {
  const { repetitions, warmupJobs, jobs, concurrency, settleMs, growthBoundBytes, heapGrowthBoundBytes } =
    options.memory;
  const half = Math.floor(jobs / 2);
  const runs = await repeat(repetitions, async () => {
    const harness = await benchHarness(["local"]);
    const { worker } = await connectWorker(
      harness,
      "local",
      { handler: "bench/handlers/trivial.ts" },
      // --expose-gc lets the probe job collect garbage before reading the heap; nothing else changes.
      { BENCH_CONCURRENCY: String(concurrency), NODE_OPTIONS: "--expose-gc" },
    );
    const run = async (from: number, to: number) => {
      for (let done = from; done < to; done += BATCH) {
        const count = Math.min(BATCH, to - done);
        await runJobs(
          harness,
          "local",
          Array.from({ length: count }, (_, i) => ({ n: done + i })),
        );
      }
    };
    try {
      await settle(settleMs);
      const idle = worker.rssBytes() ?? Number.NaN;
      await run(-warmupJobs, 0);
      await settle(settleMs);
      const warm = worker.rssBytes() ?? Number.NaN;
      await run(0, half);
      const heapHalf = await heapUsed(harness);
      await run(half, jobs);
      await settle(settleMs);
      const after = worker.rssBytes() ?? Number.NaN;
      const heapEnd = await heapUsed(harness);
      return { idle, warm, after, growth: after - warm, heapGrowth: heapEnd - heapHalf };
    } finally {
      await worker.stop();
      await harness.close();
    }
  });
  const rssOk = runs.every((r) => r.growth <= growthBoundBytes);
  const heapOk = runs.every((r) => r.heapGrowth <= heapGrowthBoundBytes);
  const count = jobs.toLocaleString("en-US");
  const verdict = (ok: boolean) => (ok ? "within" : "EXCEEDED");
  return {
    withinBound: rssOk && heapOk,
    figures: [
      figure(
        "memory.idle",
        "worker RSS, idle",
        "MiB",
        runs.map((r) => r.idle / MiB),
      ),
      figure(
        "memory.warm",
        `worker RSS after a warm-up of ${warmupJobs.toLocaleString("en-US")} jobs`,
        "MiB",
        runs.map((r) => r.warm / MiB),
      ),
      figure(
        "memory.warmUp",
        "worker RSS, warm-up's one-time growth (undici's Pool, first compilations)",
        "MiB",
        runs.map((r) => (r.warm - r.idle) / MiB),
      ),
      figure(
        "memory.after",
        `worker RSS after ${count} jobs`,
        "MiB",
        runs.map((r) => r.after / MiB),
      ),
      figure(
        "memory.growth",
        `worker RSS growth over ${count} jobs after the warm-up`,
        "MiB",
        runs.map((r) => r.growth / MiB),
        `bound ${growthBoundBytes / MiB} MiB: ${verdict(rssOk)}`,
      ),
      figure(
        "memory.heapGrowth",
        `worker heap after GC, growth over the last ${(jobs - half).toLocaleString("en-US")} jobs`,
        "MiB",
        runs.map((r) => r.heapGrowth / MiB),
        `bound ${heapGrowthBoundBytes / MiB} MiB: ${verdict(heapOk)}`,
      ),
    ],
  };
}
