/**
 * The figures that the harness's HTTP layer decides: job throughput at concurrency 8 and 64 and the
 * small-item stream, each with its same-run ceiling, in one short process that prints them as one
 * JSON line. Run it several times, alternating the variants compared, and take medians over the
 * runs (docs/benchmarks.md, "Comparing two versions of the harness").
 *
 *   node bin/run-ts.mjs bench/http-layer.ts [--label <name>] [--items <n>] [--worker-root <dir>] [--concurrency 1,8,64]
 *
 * `--worker-root` runs another checkout's worker (its dist/ built) against this harness, so two
 * harnesses can be measured against the same worker.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startCeilingServer } from "./ceiling.js";
import { smallStreamRun, streamJob } from "./figures/streaming.js";
import { measureThroughput } from "./figures/throughput.js";
import { FULL_OPTIONS } from "./options.js";
import { benchHarness, connectWorker } from "./session.js";
import { median, repeat } from "./stats.js";

/** The throughput figure ids printed (median of the run's repetitions each), where their level ran. */
const KEPT = [
  "throughput.c1",
  "throughput.c1.ceiling",
  "throughput.c1.ratio",
  "throughput.c1.workerCpu",
  "throughput.c8.workerCpu",
  "throughput.c64.workerCpu",
  "throughput.c8",
  "throughput.c8.ceiling",
  "throughput.c8.ratio",
  "throughput.c8.harnessCpu",
  "throughput.c64",
  "throughput.c64.ceiling",
  "throughput.c64.ratio",
  "throughput.c64.harnessCpu",
];

/**
 * The small-item stream of `stream.small.runlet` and its ceiling, without the post-and-wait
 * baseline, the coalesced variant and the large item that `npm run bench` measures beside it.
 */
async function measureSmallStream(items: number, repetitions: number, workerRoot: string | undefined) {
  const harness = await benchHarness(["runlet"]);
  const ceilingServer = await startCeilingServer();
  const { worker } = await connectWorker(harness, "runlet", {
    handler: "bench/handlers/stream.ts",
    ...(workerRoot === undefined ? {} : { root: workerRoot }),
  });
  try {
    await streamJob(harness, "runlet", { items: Math.min(2_000, items) });
    const runs = await repeat(repetitions, () =>
      smallStreamRun(harness, "runlet", worker.pid, items, ceilingServer.url),
    );
    return {
      "stream.small.runlet": median(runs.map((r) => r.perSecond)),
      "stream.small.ceiling": median(runs.map((r) => r.ceiling)),
      "stream.small.ceilingRatio": median(runs.map((r) => r.ratio)),
      "stream.small.harnessCpu": median(runs.map((r) => r.harnessCpu)),
    };
  } finally {
    await worker.stop();
    await harness.close();
    await ceilingServer.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      label: { type: "string" },
      items: { type: "string" },
      "worker-root": { type: "string" },
      concurrency: { type: "string" },
    },
  });
  const concurrency = (values.concurrency ?? "8,64").split(",").map(Number);
  if (concurrency.some((c) => !Number.isInteger(c) || c < 1))
    throw new Error(`--concurrency takes levels such as 1,8,64, got ${values.concurrency}`);
  const workerRoot = values["worker-root"] === undefined ? undefined : resolve(values["worker-root"]);
  const items = Number(values.items ?? "20000");
  if (!Number.isInteger(items) || items < 1)
    throw new Error(`--items must be an integer ≥ 1, got ${values.items}`);
  const throughput = await measureThroughput(
    {
      ...FULL_OPTIONS,
      throughput: { ...FULL_OPTIONS.throughput, concurrency },
    },
    workerRoot,
  );
  const out: Record<string, number | string> = { label: values.label ?? "" };
  for (const f of throughput.figures) {
    if (KEPT.includes(f.id)) out[f.id] = f.median;
  }
  Object.assign(out, await measureSmallStream(items, FULL_OPTIONS.stream.repetitions, workerRoot));
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}
