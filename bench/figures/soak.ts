import type { Harness } from "../../dist/harness/index.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, connectWorker, settle } from "../session.js";
import { type Figure, figure } from "../stats.js";

/**
 * A real-time soak: one worker process under mixed jobs (short, streaming, failing, cancelled)
 * for `soak.durationMs`, probed every `soak.sampleMs` for its RSS, heap after GC, open handles and
 * event-loop delay p99. Each figure is a least-squares slope per hour (near zero when nothing
 * grows), plus the jobs that ended otherwise than expected (target: 0).
 */

const MiB = 1_048_576;
const HOUR = 3_600_000;
type Kind = "short" | "stream" | "fail" | "cancel";
/** One round's jobs: mostly short, some streaming, a failure, a cancel. */
const ROUND: readonly Kind[] = ["short", "short", "short", "short", "stream", "stream", "fail", "cancel"];
const EXPECTED: Record<Kind, string> = {
  short: "COMPLETED",
  stream: "COMPLETED",
  fail: "FAILED",
  cancel: "CANCELLED",
};

interface Sample {
  readonly atMs: number;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly handles: number;
  readonly loopDelayP99Ms: number;
}

/** The least-squares slope of `y` over `x`. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function probe(harness: Harness, startedAt: number): Promise<Sample> {
  const job = await harness.waitForJob(harness.enqueue("local", { input: { kind: "probe" } }));
  // The handler streams (it is a generator for every kind): the probe's answer is its one item.
  const out = job.stream[0]?.output as Omit<Sample, "atMs"> | undefined;
  if (out === undefined || typeof out.heapUsedBytes !== "number") {
    throw new Error(`the soak probe answered ${JSON.stringify(out)} (is --expose-gc set?)`);
  }
  return { atMs: performance.now() - startedAt, ...out };
}

/** Runs the soak and returns its figures (one run each: the soak is one long run). */
export async function measureSoak(options: BenchOptions): Promise<Figure[]> {
  const { durationMs, sampleMs } = options.soak;
  const harness = await benchHarness(["local"]);
  const { worker } = await connectWorker(
    harness,
    "local",
    { handler: "bench/handlers/soak.ts" },
    { NODE_OPTIONS: "--expose-gc" },
  );
  const samples: Sample[] = [];
  let jobs = 0;
  let unexpected = 0;
  try {
    const startedAt = performance.now();
    await settle(Math.min(1_000, sampleMs));
    samples.push(await probe(harness, startedAt));
    let nextSample = sampleMs;
    while (performance.now() - startedAt < durationMs) {
      const round = ROUND.map((kind) => ({ kind, id: harness.enqueue("local", { input: { kind } }) }));
      for (const { kind, id } of round) {
        if (kind !== "cancel") continue;
        while (harness.job(id)?.status === "IN_QUEUE") await settle(2);
        if (harness.job(id)?.status === "IN_PROGRESS") harness.stopJob(id);
      }
      const ended = await Promise.all(round.map(({ id }) => harness.waitForJob(id, { timeoutMs: 60_000 })));
      jobs += ended.length;
      unexpected += ended.filter((job, i) => job.status !== EXPECTED[round[i]!.kind]).length;
      if (performance.now() - startedAt >= nextSample) {
        samples.push(await probe(harness, startedAt));
        nextSample += sampleMs;
      }
    }
    // A last probe right after the loop's own would find no event-loop delay recorded since
    // (the histogram samples every 10 ms): take it only when a fair share of a period has passed.
    if (performance.now() - startedAt - samples.at(-1)!.atMs >= sampleMs / 2) {
      samples.push(await probe(harness, startedAt));
    }
  } finally {
    await worker.stop();
    await harness.close();
  }
  const perHour = (pick: (s: Sample) => number, scale = 1) =>
    slope(samples.map((s) => [s.atMs / HOUR, pick(s) / scale] as const));
  const minutes = (durationMs / 60_000).toFixed(1);
  const note = `${samples.length} samples over ${minutes} min, ${jobs} jobs`;
  return [
    figure("soak.rssSlope", "soak: worker RSS slope", "MiB/h", [perHour((s) => s.rssBytes, MiB)], note),
    figure("soak.heapSlope", "soak: worker heap after GC slope", "MiB/h", [
      perHour((s) => s.heapUsedBytes, MiB),
    ]),
    figure("soak.handlesSlope", "soak: worker open handles slope", "handles/h", [perHour((s) => s.handles)]),
    figure("soak.loopDelayP99Slope", "soak: worker event-loop delay p99 slope", "ms/h", [
      perHour((s) => s.loopDelayP99Ms),
    ]),
    figure("soak.loopDelayP99", "soak: worker event-loop delay p99, last sample", "ms", [
      samples.at(-1)!.loopDelayP99Ms,
    ]),
    figure("soak.jobs", "soak: jobs run", "jobs", [jobs]),
    figure("soak.unexpected", "soak: jobs that ended otherwise than expected (target 0)", "jobs", [
      unexpected,
    ]),
  ];
}
