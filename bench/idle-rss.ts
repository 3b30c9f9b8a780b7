/**
 * A worker's idle RSS before any job and after its first ones (issue 43): the transport loads
 * undici's Pool once the worker is idle after its first job, so the second figure carries it.
 * Starts `--starts` fresh workers of each checkout (`--before`'s and this one), alternating
 * (ABBA) on one harness, each runs 20 trivial jobs, and prints the medians as one JSON line per
 * checkout. `npm run bench -- --before` measures the same (compareIdleRss) beside its other figures.
 *
 *   node bin/run-ts.mjs bench/idle-rss.ts --before <checkout> [--starts 3]
 */
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { benchHarness, connectWorker } from "./session.js";
import { alternate, median, SIDES, type Side } from "./stats.js";
import { ROOT } from "./worker-process.js";

/** Jobs a fresh worker runs before its second reading. */
export const IDLE_RSS_JOBS = 20;

/** One fresh worker's RSS, bytes: idle before any job, and idle again after {@link IDLE_RSS_JOBS} jobs. */
export interface IdleRssRun {
  readonly idleBytes: number;
  readonly afterJobsBytes: number;
}

/**
 * Starts `starts` fresh workers of each checkout (`roots`) in turn, alternating (ABBA), on one
 * harness (each side its own endpoint); each idles `settleMs`, runs {@link IDLE_RSS_JOBS} trivial
 * jobs one after another, idles twice `settleMs` (the transport's warm-up waits 250 ms of idle),
 * and is stopped.
 */
export async function compareIdleRss(
  roots: Readonly<Record<Side, string>>,
  starts: number,
  settleMs = 1_000,
): Promise<Record<Side, IdleRssRun[]>> {
  const harness = await benchHarness(SIDES);
  try {
    return await alternate(starts, async (side) => {
      const { worker } = await connectWorker(harness, side, {
        handler: "bench/handlers/trivial.ts",
        root: roots[side],
      });
      try {
        await sleep(settleMs);
        const idleBytes = worker.rssBytes() ?? Number.NaN;
        for (let j = 0; j < IDLE_RSS_JOBS; j++) {
          const job = await harness.waitForJob(harness.enqueue(side, { input: {} }), { timeoutMs: 60_000 });
          if (job.status !== "COMPLETED") throw new Error(`idle-RSS job on ${side} ended ${job.status}`);
        }
        await sleep(2 * settleMs);
        return { idleBytes, afterJobsBytes: worker.rssBytes() ?? Number.NaN };
      } finally {
        await worker.stop();
      }
    });
  } finally {
    await harness.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { before: { type: "string" }, starts: { type: "string" } } });
  if (values.before === undefined) throw new Error("--before <checkout> is required");
  const starts = Number(values.starts ?? "3");
  const runs = await compareIdleRss({ before: resolve(values.before), after: ROOT }, starts);
  const mib = (values: number[]) => Number((median(values) / 1_048_576).toFixed(1));
  for (const side of SIDES) {
    process.stdout.write(
      `${JSON.stringify({ label: side, idleMiB: mib(runs[side].map((r) => r.idleBytes)), afterJobsMiB: mib(runs[side].map((r) => r.afterJobsBytes)), starts })}\n`,
    );
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}
