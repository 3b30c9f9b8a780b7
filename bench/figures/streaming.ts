import type { Harness } from "../../dist/harness/index.js";
import { bracketed, ownCpuMs, processCpuMs, startCeilingServer } from "../ceiling.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, type Connected, compareWorkers, connectWorker } from "../session.js";
import { type Figure, figure, repeat, type Side } from "../stats.js";
import { resetPeakRss, type WorkerProcess } from "../worker-process.js";

const STREAM = "bench/handlers/stream.ts";
const MB = 1_000_000;

/** Runs one stream job; returns the elapsed ms once it is terminal, after checking every item arrived. */
export async function streamJob(harness: Harness, endpointId: string, input: object, expectChunks?: number) {
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

/** One paired run of the short-string stream. */
export interface SmallStreamRun {
  /** Items per second from enqueue to the job's end. */
  readonly perSecond: number;
  /** The ceiling's sequential posts per second, measured right before and after. */
  readonly ceiling: number;
  readonly ratio: number;
  /** Worker CPU per item, ms. */
  readonly workerCpu: number;
  /** Bench-process (harness) CPU per item, ms. */
  readonly harnessCpu: number;
}

/**
 * One job of `items` short strings through `endpointId`'s worker (process `workerPid`), its
 * ceiling (the same number of sequential posts of one short item, a fifth as many) measured right
 * before and after it.
 */
export async function smallStreamRun(
  harness: Harness,
  endpointId: string,
  workerPid: number,
  items: number,
  ceilingUrl: string,
): Promise<SmallStreamRun> {
  // Sequential: stream items of one job are posted one at a time, in order (docs/protocol.md, "Streaming").
  const { result, ceiling } = await bracketed(
    {
      url: `${ceilingUrl}/v2/runlet/job-stream/pod-1/job-1?gpu=LOCAL&isStream=false`,
      body: JSON.stringify({ output: "tok12345 " }),
      count: Math.max(200, Math.floor(items / 5)),
      inFlight: 1,
    },
    async () => {
      const cpu0 = processCpuMs(workerPid) ?? Number.NaN;
      const ownCpu0 = ownCpuMs();
      const job = await streamJob(harness, endpointId, { items }, items);
      return {
        perSecond: items / (job.ms / 1000),
        workerCpu: ((processCpuMs(workerPid) ?? Number.NaN) - cpu0) / items,
        harnessCpu: (ownCpuMs() - ownCpu0) / items,
      };
    },
  );
  return { ...result, ceiling, ratio: result.perSecond / ceiling };
}

/** One paired run of the large string item. */
export interface LargeItemRun {
  readonly mbps: number;
  /** The ceiling's MB/s (1 MiB bodies, sequential), measured right before and after. */
  readonly ceiling: number;
  readonly ratio: number;
  /** The worker's peak RSS during the run, bytes (NaN where the OS does not say). */
  readonly peakBytes: number;
}

/**
 * One job streaming a single string of `bytes` through `endpointId`'s worker, its ceiling (the
 * item's ≤ 1 MiB chunks posted one after another as bare JSON bodies) measured right before and
 * after it; the worker's peak RSS is reset first, so the peak is this run's.
 */
export async function largeItemRun(
  harness: Harness,
  endpointId: string,
  worker: WorkerProcess,
  bytes: number,
  ceilingUrl: string,
): Promise<LargeItemRun> {
  const chunk = JSON.stringify({ output: "x".repeat(Math.min(bytes, 1_048_576)) });
  const { result: ms, ceiling: postsPerSecond } = await bracketed(
    {
      url: `${ceilingUrl}/v2/runlet/job-stream/pod-1/job-1?gpu=LOCAL&isStream=false`,
      body: chunk,
      count: Math.max(20, Math.ceil(bytes / 1_048_576)),
      inFlight: 1,
    },
    async () => {
      resetPeakRss(worker.pid);
      return (await streamJob(harness, endpointId, { bytes })).ms;
    },
  );
  const mbps = bytes / MB / (ms / 1000);
  const ceiling = (postsPerSecond * (chunk.length - 13)) / MB;
  return { mbps, ceiling, ratio: mbps / ceiling, peakBytes: worker.peakRssBytes() ?? Number.NaN };
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
      const runlet = await smallStreamRun(harness, "runlet", runletPid, smallItems, ceilingServer.url);
      const baseline = await streamJob(harness, "baseline", small, smallItems);
      const coalesced = await streamJob(harness, "coalesced", small);
      return {
        ceiling: runlet.ceiling,
        workerCpu: runlet.workerCpu,
        harnessCpu: runlet.harnessCpu,
        runlet: runlet.perSecond,
        baseline: smallItems / (baseline.ms / 1000),
        coalesced: smallItems / (coalesced.ms / 1000),
        coalescedChunks: coalesced.chunks,
      };
    });
    // Warm-up of the large path, untimed, as for the others: the handler makes its string here.
    await streamJob(harness, "runlet", { bytes: largeBytes });
    const large = await repeat(options.stream.repetitions, () =>
      largeItemRun(harness, "runlet", workers[0]!.worker, largeBytes, ceilingServer.url),
    );
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
        large.map((r) => r.ratio),
      ),
      figure(
        "stream.large.peakRss",
        `worker peak RSS while streaming the ${Math.round(largeBytes / MB)} MB string`,
        "MiB",
        large.map((r) => r.peakBytes / 1_048_576),
      ),
    ];
  } finally {
    await Promise.all(workers.map((w) => w.worker.stop()));
    await harness.close();
    await ceilingServer.close();
  }
}

/**
 * The short-string stream of two checkouts' workers (`roots`) on one harness, `rounds` paired runs
 * of {@link smallStreamRun} a side, alternating (ABBA), for `npm run bench -- --before`.
 */
export function compareSmallStream(
  roots: Readonly<Record<Side, string>>,
  items: number,
  rounds: number,
): Promise<Record<Side, SmallStreamRun[]>> {
  return compareWorkers(
    roots,
    rounds,
    {
      handler: STREAM,
      warmUp: (harness, side) =>
        streamJob(harness, side, { items: Math.max(1, Math.min(2_000, Math.floor(items / 10))) }),
    },
    (harness, side, worker, ceilingUrl) => smallStreamRun(harness, side, worker.pid, items, ceilingUrl),
  );
}

/**
 * One string item of `bytes` from two checkouts' workers (`roots`) on one harness, `rounds` paired
 * runs of {@link largeItemRun} a side, alternating (ABBA), after an untimed warm-up in which each
 * handler makes its string; for bench/large-item.ts and `npm run bench -- --before`.
 */
export function compareLargeItem(
  roots: Readonly<Record<Side, string>>,
  bytes: number,
  rounds: number,
): Promise<Record<Side, LargeItemRun[]>> {
  return compareWorkers(
    roots,
    rounds,
    { handler: STREAM, warmUp: (harness, side) => streamJob(harness, side, { bytes }) },
    (harness, side, worker, ceilingUrl) => largeItemRun(harness, side, worker, bytes, ceilingUrl),
  );
}
