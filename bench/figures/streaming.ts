import type { Harness } from "../../dist/harness/index.js";
import { bracketed, ownCpuMs, processCpuMs, startCeilingServer } from "../ceiling.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, type Connected, connectWorker } from "../session.js";
import { type Figure, figure, repeat } from "../stats.js";
import { resetPeakRss } from "../worker-process.js";

const STREAM = "bench/handlers/stream.ts";
const MB = 1_000_000;

/** Runs one stream job; returns the elapsed ms once it is terminal, after checking every item arrived. */
async function streamJob(harness: Harness, endpointId: string, input: object, expectChunks?: number) {
  const started = performance.now();
  const id = harness.enqueue(endpointId, { input });
  const job = await harness.waitForJob(id, { timeoutMs: 600_000 });
  const ms = performance.now() - started;
  if (job.status !== "COMPLETED")
    throw new Error(`stream job on ${endpointId} ended ${job.status}: ${job.error}`);
  if (expectChunks !== undefined && job.stream.length !== expectChunks) {
    throw new Error(
      `stream job on ${endpointId} delivered ${job.stream.length} chunks, expected ${expectChunks}`,
    );
  }
  return { ms, chunks: job.stream.length };
}

/**
 * Streaming: items/s for a generator yielding many short strings, runlet against a baseline
 * worker that posts one item at a time and waits for each post (same harness, alternating runs);
 * the same with coalescing on; and MB/s for one large string item with the worker's peak RSS.
 */
export async function measureStreaming(options: BenchOptions): Promise<Figure[]> {
  const { smallItems, largeBytes, coalesceMs } = options.stream;
  const harness = await benchHarness(["runlet", "baseline", "coalesced"]);
  const ceilingServer = await startCeilingServer();
  const workers: Connected[] = [];
  try {
    workers.push(await connectWorker(harness, "runlet", { handler: STREAM }));
    workers.push(await connectWorker(harness, "baseline", { baseline: true }));
    workers.push(
      await connectWorker(
        harness,
        "coalesced",
        { handler: STREAM },
        { BENCH_COALESCE_MS: String(coalesceMs) },
      ),
    );
    const small = { items: smallItems };
    // Warm-up of each path (JIT, connections) on a few items.
    for (const ep of ["runlet", "baseline", "coalesced"]) {
      await streamJob(harness, ep, { items: Math.max(1, Math.min(2_000, Math.floor(smallItems / 10))) });
    }
    const runletPid = workers[0]!.worker.pid;
    const runs = await repeat(options.stream.repetitions, async () => {
      // Sequential: stream items of one job are posted one at a time, in order (docs/protocol.md, "Streaming").
      const { result: runlet, ceiling } = await bracketed(
        {
          url: `${ceilingServer.url}/v2/runlet/job-stream/pod-1/job-1?gpu=LOCAL&isStream=false`,
          body: JSON.stringify({ output: "tok12345 " }),
          count: Math.max(200, Math.floor(smallItems / 5)),
          inFlight: 1,
        },
        async () => {
          const cpu0 = processCpuMs(runletPid) ?? Number.NaN;
          const ownCpu0 = ownCpuMs();
          const job = await streamJob(harness, "runlet", small, smallItems);
          return {
            ms: job.ms,
            workerCpu: ((processCpuMs(runletPid) ?? Number.NaN) - cpu0) / smallItems,
            harnessCpu: (ownCpuMs() - ownCpu0) / smallItems,
          };
        },
      );
      const { workerCpu, harnessCpu } = runlet;
      const baseline = await streamJob(harness, "baseline", small, smallItems);
      const coalesced = await streamJob(harness, "coalesced", small);
      return {
        ceiling,
        workerCpu,
        harnessCpu,
        runlet: smallItems / (runlet.ms / 1000),
        baseline: smallItems / (baseline.ms / 1000),
        coalesced: smallItems / (coalesced.ms / 1000),
        coalescedChunks: coalesced.chunks,
      };
    });
    // The large item's ceiling: its ≤ 1 MiB chunks posted one after another as bare JSON bodies.
    const largeChunk = JSON.stringify({ output: "x".repeat(Math.min(largeBytes, 1_048_576)) });
    // Warm-up of the large path, untimed, as for the others: the handler makes its string here.
    await streamJob(harness, "runlet", { bytes: largeBytes });
    const large = await repeat(options.stream.repetitions, async () => {
      const pid = workers[0]!.worker.pid;
      const { result: ms, ceiling: postsPerSecond } = await bracketed(
        {
          url: `${ceilingServer.url}/v2/runlet/job-stream/pod-1/job-1?gpu=LOCAL&isStream=false`,
          body: largeChunk,
          count: Math.max(20, Math.ceil(largeBytes / 1_048_576)),
          inFlight: 1,
        },
        async () => {
          resetPeakRss(pid);
          return (await streamJob(harness, "runlet", { bytes: largeBytes })).ms;
        },
      );
      const mbps = largeBytes / MB / (ms / 1000);
      const ceiling = (postsPerSecond * (largeChunk.length - 13)) / MB;
      return { mbps, ceiling, peak: workers[0]!.worker.peakRssBytes() ?? Number.NaN };
    });
    const items = smallItems.toLocaleString("en-US");
    return [
      figure(
        "stream.small.runlet",
        `stream, ${items} short strings, runlet`,
        "items/s",
        runs.map((r) => r.runlet),
      ),
      figure(
        "stream.small.ceiling",
        "  ceiling: bare undici → node:http, sequential posts",
        "posts/s",
        runs.map((r) => r.ceiling),
      ),
      figure(
        "stream.small.ceilingRatio",
        "  ratio (paired runs)",
        "x",
        runs.map((r) => r.runlet / r.ceiling),
      ),
      figure(
        "stream.small.workerCpu",
        "  worker CPU per item",
        "ms",
        runs.map((r) => r.workerCpu),
      ),
      figure(
        "stream.small.harnessCpu",
        "  harness CPU per item (bench process)",
        "ms",
        runs.map((r) => r.harnessCpu),
      ),
      figure(
        "stream.small.baseline",
        `stream, ${items} short strings, post-and-wait baseline`,
        "items/s",
        runs.map((r) => r.baseline),
      ),
      figure(
        "stream.small.ratio",
        "stream, runlet ÷ baseline (paired runs)",
        "x",
        runs.map((r) => r.runlet / r.baseline),
      ),
      figure(
        "stream.small.coalesced",
        `stream, ${items} short strings, runlet with streamCoalesceMs ${coalesceMs}`,
        "items/s",
        runs.map((r) => r.coalesced),
        `items merged into a median of ${Math.round(runs.map((r) => r.coalescedChunks).sort((a, b) => a - b)[runs.length >> 1]!)} chunks`,
      ),
      figure(
        "stream.large.throughput",
        `stream, one ${Math.round(largeBytes / MB)} MB string`,
        "MB/s",
        large.map((r) => r.mbps),
      ),
      figure(
        "stream.large.ceiling",
        "  ceiling: bare undici → node:http, 1 MiB bodies, sequential",
        "MB/s",
        large.map((r) => r.ceiling),
      ),
      figure(
        "stream.large.ratio",
        "  ratio (paired runs)",
        "x",
        large.map((r) => r.mbps / r.ceiling),
      ),
      figure(
        "stream.large.peakRss",
        `worker peak RSS while streaming the ${Math.round(largeBytes / MB)} MB string`,
        "MiB",
        large.map((r) => r.peak / 1_048_576),
      ),
    ];
  } finally {
    await Promise.all(workers.map((w) => w.worker.stop()));
    await harness.close();
    await ceilingServer.close();
  }
}
