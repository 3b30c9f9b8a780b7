/**
 * One 100 MB string item streamed by main's worker and by this checkout's (issue 43), against
 * this checkout's harness and the large item's ceiling (its 1 MiB chunks posted one after another
 * as bare JSON bodies), alternating the two workers; prints one JSON line per checkout with the
 * medians of MB/s and of its ratio to the ceiling.
 *
 *   node bin/run-ts.mjs bench/large-item.ts --before <checkout> [--rounds 3] [--mb 100]
 */
import { parseArgs } from "node:util";
import { bracketed, startCeilingServer } from "./ceiling.js";
import { benchHarness, connectWorker } from "./session.js";
import { median } from "./stats.js";
import { ROOT } from "./worker-process.js";

const { values } = parseArgs({
  options: { before: { type: "string" }, rounds: { type: "string" }, mb: { type: "string" } },
});
if (values.before === undefined) throw new Error("--before <checkout> is required");
const rounds = Number(values.rounds ?? "3");
const bytes = Number(values.mb ?? "100") * 1_000_000;
const MB = 1_000_000;
const trees = [
  { label: "before", root: values.before },
  { label: "after", root: ROOT },
];
const harness = await benchHarness(trees.map((t) => t.label));
const ceilingServer = await startCeilingServer();
const workers = await Promise.all(
  trees.map((t) => connectWorker(harness, t.label, { handler: "bench/handlers/stream.ts", root: t.root })),
);
const chunk = JSON.stringify({ output: "x".repeat(1_048_576) });
const figures = new Map(trees.map((t) => [t.label, { mbps: [] as number[], ratio: [] as number[] }]));
const job = async (endpointId: string): Promise<number> => {
  const started = performance.now();
  const done = await harness.waitForJob(harness.enqueue(endpointId, { input: { bytes } }), {
    timeoutMs: 600_000,
  });
  if (done.status !== "COMPLETED") throw new Error(`large item on ${endpointId} ended ${done.status}`);
  return performance.now() - started;
};
try {
  // Warm-up, untimed: the handler makes its string, and the worker is then idle after a job.
  for (const t of trees) await job(t.label);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  for (let r = 0; r < rounds; r++) {
    for (const t of r % 2 === 0 ? trees : [...trees].reverse()) {
      const { result: ms, ceiling: postsPerSecond } = await bracketed(
        {
          url: `${ceilingServer.url}/v2/x/job-stream/pod-1/job-1?gpu=LOCAL&isStream=false`,
          body: chunk,
          count: Math.max(20, Math.ceil(bytes / 1_048_576)),
          inFlight: 1,
        },
        () => job(t.label),
      );
      const mbps = bytes / MB / (ms / 1000);
      const ceiling = (postsPerSecond * (chunk.length - 13)) / MB;
      figures.get(t.label)!.mbps.push(mbps);
      figures.get(t.label)!.ratio.push(mbps / ceiling);
    }
  }
  for (const t of trees) {
    const f = figures.get(t.label)!;
    process.stdout.write(
      `${JSON.stringify({ label: t.label, mbPerSecond: Math.round(median(f.mbps)), ratio: Number(median(f.ratio).toFixed(2)), min: Number(Math.min(...f.ratio).toFixed(2)), max: Number(Math.max(...f.ratio).toFixed(2)), rounds })}\n`,
    );
  }
} finally {
  await Promise.all(workers.map((w) => w.worker.stop()));
  await harness.close();
  await ceilingServer.close();
}
