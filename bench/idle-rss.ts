/**
 * A worker's idle RSS before any job and after its first ones (issue 43): the transport loads
 * undici's Pool once the worker is idle after its first job, so the second figure carries it.
 * Starts `--starts` workers of each checkout in turn (this one and `--before`'s), each runs 20
 * trivial jobs, and prints the medians as one JSON line per checkout.
 *
 *   node bin/run-ts.mjs bench/idle-rss.ts --before <checkout> [--starts 3]
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { benchHarness, connectWorker } from "./session.js";
import { median } from "./stats.js";
import { ROOT } from "./worker-process.js";

const { values } = parseArgs({ options: { before: { type: "string" }, starts: { type: "string" } } });
if (values.before === undefined) throw new Error("--before <checkout> is required");
const starts = Number(values.starts ?? "3");
const trees = [
  { label: "before", root: values.before },
  { label: "after", root: ROOT },
];
const mib = (bytes: number | undefined) => (bytes ?? Number.NaN) / 1_048_576;
const figures = new Map(trees.map((t) => [t.label, { idle: [] as number[], afterJobs: [] as number[] }]));
for (let i = 0; i < starts; i++) {
  for (const tree of i % 2 === 0 ? trees : [...trees].reverse()) {
    const harness = await benchHarness(["e"]);
    const { worker } = await connectWorker(harness, "e", {
      handler: "bench/handlers/trivial.ts",
      root: tree.root,
    });
    try {
      await sleep(1_000);
      const idle = mib(worker.rssBytes());
      for (let j = 0; j < 20; j++) {
        await harness.waitForJob(harness.enqueue("e", { input: {} }), { timeoutMs: 60_000 });
      }
      // Idle again: the transport's warm-up waits 250 ms of it; then settle as for the idle figure.
      await sleep(2_000);
      figures.get(tree.label)!.idle.push(idle);
      figures.get(tree.label)!.afterJobs.push(mib(worker.rssBytes()));
    } finally {
      await worker.stop();
      await harness.close();
    }
  }
}
for (const tree of trees) {
  const f = figures.get(tree.label)!;
  process.stdout.write(
    `${JSON.stringify({ label: tree.label, idleMiB: Number(median(f.idle).toFixed(1)), afterJobsMiB: Number(median(f.afterJobs).toFixed(1)), starts })}\n`,
  );
}
