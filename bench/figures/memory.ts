import type { BenchOptions } from "../options.js";
import { benchHarness, connectWorker, runJobs, settle } from "../session.js";
import { type Figure, figure, repeat } from "../stats.js";

const MiB = 1_048_576;
/** Jobs are queued this many at a time, so the harness's queue is not what is measured. */
const BATCH = 1_000;

/**
 * Memory: a fresh worker process's RSS when idle (connected, no job yet), half-way, and after
 * running `memory.jobs` trivial jobs. Two bounds: the whole growth (heap warm-up included), and
 * the growth over the second half alone, which stays flat unless something leaks per job.
 */
export async function measureMemory(
  options: BenchOptions,
): Promise<{ figures: Figure[]; withinBound: boolean }> {
  const { repetitions, jobs, concurrency, settleMs, growthBoundBytes, secondHalfBoundBytes } = options.memory;
  const half = Math.floor(jobs / 2);
  const runs = await repeat(repetitions, async () => {
    const harness = await benchHarness(["local"]);
    const { worker } = await connectWorker(
      harness,
      "local",
      { handler: "bench/handlers/trivial.ts" },
      { BENCH_CONCURRENCY: String(concurrency) },
    );
    const rss = async () => {
      await settle(settleMs);
      return worker.rssBytes() ?? Number.NaN;
    };
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
      const idle = await rss();
      await run(0, half);
      const middle = await rss();
      await run(half, jobs);
      const after = await rss();
      return { idle, after, growth: after - idle, secondHalf: after - middle };
    } finally {
      await worker.stop();
      await harness.close();
    }
  });
  const withinBound = runs.every((r) => r.growth <= growthBoundBytes && r.secondHalf <= secondHalfBoundBytes);
  const count = jobs.toLocaleString("en-US");
  const verdict = (ok: boolean) => (ok ? "within" : "EXCEEDED");
  return {
    withinBound,
    figures: [
      figure(
        "memory.idle",
        "worker RSS, idle",
        "MiB",
        runs.map((r) => r.idle / MiB),
      ),
      figure(
        "memory.after",
        `worker RSS after ${count} jobs`,
        "MiB",
        runs.map((r) => r.after / MiB),
      ),
      figure(
        "memory.growth",
        `worker RSS growth over ${count} jobs`,
        "MiB",
        runs.map((r) => r.growth / MiB),
        `bound ${growthBoundBytes / MiB} MiB: ${verdict(runs.every((r) => r.growth <= growthBoundBytes))}`,
      ),
      figure(
        "memory.secondHalf",
        `worker RSS growth over the last ${(jobs - half).toLocaleString("en-US")} jobs`,
        "MiB",
        runs.map((r) => r.secondHalf / MiB),
        `bound ${secondHalfBoundBytes / MiB} MiB: ${verdict(runs.every((r) => r.secondHalf <= secondHalfBoundBytes))}`,
      ),
    ],
  };
}
