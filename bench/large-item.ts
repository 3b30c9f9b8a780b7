/**
 * One 100 MB string item streamed by another checkout's worker and by this checkout's (issue 43),
 * against this checkout's harness and the large item's ceiling (its 1 MiB chunks posted one after
 * another as bare JSON bodies), alternating the two workers (ABBA); prints one JSON line per
 * checkout with the medians of MB/s and of its ratio to the ceiling. `npm run bench -- --before`
 * measures the same (compareLargeItem in bench/figures/streaming.ts) beside its other figures.
 *
 *   node bin/run-ts.mjs bench/large-item.ts --before <checkout> [--rounds 3] [--mb 100]
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { compareLargeItem } from "./figures/streaming.js";
import { median, SIDES } from "./stats.js";
import { ROOT } from "./worker-process.js";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { before: { type: "string" }, rounds: { type: "string" }, mb: { type: "string" } },
  });
  if (values.before === undefined) throw new Error("--before <checkout> is required");
  const rounds = Number(values.rounds ?? "3");
  const bytes = Number(values.mb ?? "100") * 1_000_000;
  const runs = await compareLargeItem({ before: resolve(values.before), after: ROOT }, bytes, rounds);
  for (const side of SIDES) {
    const ratio = runs[side].map((r) => r.ratio);
    process.stdout.write(
      `${JSON.stringify({ label: side, mbPerSecond: Math.round(median(runs[side].map((r) => r.mbps))), ratio: Number(median(ratio).toFixed(2)), min: Number(Math.min(...ratio).toFixed(2)), max: Number(Math.max(...ratio).toFixed(2)), rounds })}\n`,
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
