import type { Harness } from "../../dist/harness/index.js";
import { callMs, DEFAULT_COST, idealJobsPerSecond } from "../../examples/batched-embeddings/device.js";
import { ownCpuMs, processCpuMs } from "../ceiling.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, connectWorker, runJobs } from "../session.js";
import { type Figure, figure, percentile, repeat } from "../stats.js";

const BATCHED = "bench/handlers/batched.ts";

/**
 * Dynamic batching (docs/handler.md, "Batching"): examples/batched-embeddings' cost model (20 ms a
 * call plus 0.2 ms an input) behind a batch handler in one `runlet start` process, with
 * `options.batching.jobs` jobs queued at once, at each `maxSize`. Beside each figure, the ideal
 * the cost model gives for the same run: jobs/s of back-to-back full calls, and the latency of
 * job i finishing with call ⌈(i+1)/maxSize⌉. Then lone jobs, one at a time: how long each waited
 * in its batch (the window), against `maxWaitMs`.
 */
export async function measureBatching(options: BenchOptions): Promise<Figure[]> {
  const figures: Figure[] = [];
  const { sizes, jobs, maxWaitMs, loneJobs } = options.batching;
  let window: Figure | undefined;
  for (const size of sizes) {
    await withWorker(size, maxWaitMs, async (harness, pid) => {
      await runJobs(harness, "local", inputs(size * 2)); // warm-up
      const runs = await repeat(options.repetitions, async () => {
        const workerCpu0 = processCpuMs(pid) ?? Number.NaN;
        const ownCpu0 = ownCpuMs();
        const { elapsedMs, ids } = await runJobs(harness, "local", inputs(jobs));
        const workerCpu = ((processCpuMs(pid) ?? Number.NaN) - workerCpu0) / jobs;
        const harnessCpu = (ownCpuMs() - ownCpu0) / jobs;
        const latencies = ids.map((id) => {
          const job = harness.job(id);
          return (job?.delayTime ?? Number.NaN) + (job?.executionTime ?? Number.NaN);
        });
        const waits = batchWaits(harness, ids);
        const ideal = idealLatencies(jobs, size);
        return {
          perSecond: jobs / (elapsedMs / 1000),
          p50: percentile(latencies, 50),
          p99: percentile(latencies, 99),
          idealP50: percentile(ideal, 50),
          idealP99: percentile(ideal, 99),
          wait: percentile(waits, 50),
          workerCpu,
          harnessCpu,
        };
      });
      const ideal = idealJobsPerSecond(DEFAULT_COST, size);
      const s = `batch.s${size}`;
      figures.push(
        figure(
          s,
          `batching, maxSize ${size}, ${jobs} jobs queued`,
          "jobs/s",
          runs.map((r) => r.perSecond),
        ),
        figure(
          `${s}.ideal`,
          `  ideal: ${size} per ${callMs(DEFAULT_COST, size).toFixed(1)} ms call`,
          "jobs/s",
          runs.map(() => ideal),
        ),
        figure(
          `${s}.ratio`,
          "  ratio to the ideal",
          "x",
          runs.map((r) => r.perSecond / ideal),
        ),
        figure(
          `${s}.p50`,
          "  per-job latency p50 (queued → result)",
          "ms",
          runs.map((r) => r.p50),
        ),
        figure(
          `${s}.p50.ideal`,
          "    ideal p50",
          "ms",
          runs.map((r) => r.idealP50),
        ),
        figure(
          `${s}.p99`,
          "  per-job latency p99",
          "ms",
          runs.map((r) => r.p99),
        ),
        figure(
          `${s}.p99.ideal`,
          "    ideal p99",
          "ms",
          runs.map((r) => r.idealP99),
        ),
        figure(
          `${s}.wait`,
          "  wait in the batch p50",
          "ms",
          runs.map((r) => r.wait),
        ),
        figure(
          `${s}.workerCpu`,
          "  worker CPU per job",
          "ms",
          runs.map((r) => r.workerCpu),
        ),
        figure(
          `${s}.harnessCpu`,
          "  harness CPU per job (bench process)",
          "ms",
          runs.map((r) => r.harnessCpu),
        ),
      );
      // The last size's worker also measures the window, one lone job at a time.
      if (size === sizes.at(-1))
        window = await measureWindow(harness, options.repetitions, loneJobs, size, maxWaitMs);
    });
  }
  if (window !== undefined) figures.push(window);
  return figures;
}

/** A lone job's wait in its batch: each job sent after the previous one ended, so it waits the whole window. */
async function measureWindow(
  harness: Harness,
  repetitions: number,
  loneJobs: number,
  size: number,
  maxWaitMs: number,
): Promise<Figure> {
  const runs = await repeat(repetitions, async () => {
    const waits: number[] = [];
    for (let n = 0; n < loneJobs; n++) {
      const { ids } = await runJobs(harness, "local", inputs(1));
      waits.push(...batchWaits(harness, ids));
    }
    return percentile(waits, 50);
  });
  return figure(
    "batch.window.p50",
    `lone job's wait in its batch p50 (maxSize ${size}, maxWaitMs ${maxWaitMs})`,
    "ms",
    runs,
    `target ≤ maxWaitMs + 1 = ${maxWaitMs + 1} ms`,
  );
}

function inputs(count: number): { n: number }[] {
  return Array.from({ length: count }, (_, n) => ({ n }));
}

/** Starts a fresh harness and worker with `maxSize` and `maxWaitMs`, runs `fn`, stops both. */
async function withWorker(
  maxSize: number,
  maxWaitMs: number,
  fn: (harness: Harness, workerPid: number) => Promise<void>,
) {
  const harness = await benchHarness(["local"]);
  const { worker } = await connectWorker(
    harness,
    "local",
    { handler: BATCHED },
    {
      BENCH_BATCH_SIZE: String(maxSize),
      BENCH_BATCH_WAIT_MS: String(maxWaitMs),
    },
  );
  try {
    await fn(harness, worker.pid);
  } finally {
    await worker.stop();
    await harness.close();
  }
}

/** Each job's wait in its batch, as its final job-done's `batch_wait_ms` says. */
function batchWaits(harness: Harness, ids: readonly string[]): number[] {
  const wanted = new Set(ids);
  const waits: number[] = [];
  for (const request of harness.requests({ route: "job-done" })) {
    const id = request.path.split("/").at(-1) ?? "";
    const wait = request.query["batch_wait_ms"];
    if (wanted.has(decodeURIComponent(id)) && wait !== undefined) waits.push(Number(wait));
  }
  if (waits.length !== ids.length)
    throw new Error(`found the batch of ${waits.length} of ${ids.length} jobs`);
  return waits;
}

/** The latency of each of `jobs` queued at once, served in back-to-back full calls of `size`. */
function idealLatencies(jobs: number, size: number): number[] {
  return Array.from({ length: jobs }, (_, i) => (Math.floor(i / size) + 1) * callMs(DEFAULT_COST, size));
}
