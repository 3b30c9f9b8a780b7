import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";
import { startHarness } from "../dist/harness/index.js";
import { WARM_COMPILE_CACHE_FLAG, WORKER_NODE_FLAGS } from "../src/cli/dockerfile.js";
import { type ColdStartFigures, measureColdStart, RUNLET_PHASE_TARGET_MS } from "./cold-start.js";
import { alternate, type Side, median as statsMedian } from "./stats.js";
import { ROOT } from "./worker-process.js";

/**
 * Cold start of two runlet trees side by side: each builds the echo example with its own
 * bundler (its dist/), then the two bundles are started in turn against one harness, a few starts
 * each per round, alternating A B, B A (compareColdStarts, which `npm run bench -- --before` also
 * runs), so both meet the same load on a shared machine. Prints the medians of runlet's own start-up phase
 * (wall and, where the bundle reports it, CPU), of the CPU to the first take and of spawn → first
 * take, each against the other and runlet's phase against its target. Nothing is written.
 *
 *   node bin/run-ts.mjs bench/cold-compare.ts --before <tree> [--after <tree>] [--rounds 5] [--node <bin>]
 *
 * `--node`: the Node binary that runs both bundles (default: the one running this script), e.g.
 * a Node 22 as the image has (`npm install node@22` in a scratch folder), whose compile cache the
 * starts get as in the image.
 * A tree is a runlet checkout whose dist/ is built (`node scripts/build.mjs`); --after defaults to
 * this one. For main as the before: `git archive main | tar -x -C <dir>`, link node_modules,
 * build.
 */

/** What one tree's starts gave, pooled over the rounds. */
export interface Pooled {
  readonly loadCpuMs: number[];
  readonly runletMs: number[];
  readonly runletCpuMs: number[];
  readonly cpuToTakeMs: number[];
  readonly takeMs: number[];
  readonly idleRssMiB: number[];
}

/** The median of `values`, undefined for none (an older bundle reports no phases). */
function median(values: readonly number[]): number | undefined {
  return values.length === 0 ? undefined : statsMedian(values);
}

function pool(into: Pooled, figures: ColdStartFigures): void {
  for (const phases of figures.phasesMsRuns)
    if (phases["runlet"] !== undefined) into.runletMs.push(phases["runlet"]);
  for (const cpu of figures.phasesCpuMsRuns)
    if (cpu["runlet"] !== undefined) into.runletCpuMs.push(cpu["runlet"]);
  into.cpuToTakeMs.push(...figures.coldStartCpuMsRuns);
  into.takeMs.push(...figures.coldStartMsRuns);
  into.idleRssMiB.push(...figures.idleRssBytesRuns.map((b) => b / 1_048_576));
}

/**
 * Prints the process's CPU time at exit: loaded with `--import` before the bundle, the same on both
 * sides, so that an older bundle, whose `worker ready` line has no `cpuMs`, is measured too.
 */
const CPU_AT_EXIT = `data:text/javascript,${encodeURIComponent(
  'process.on("exit",()=>{const u=process.cpuUsage();process.stderr.write("cpu-at-exit "+(u.user+u.system)/1000+"\\n")})',
)}`;

/**
 * CPU ms of loading `bundle` as a start loads it (its static modules and the handler) and exiting:
 * `--warm-compile-cache`, with the image's Node flags and environment.
 */
async function loadCpuMs(bundle: string, node: string): Promise<number> {
  const { stderr } = await promisify(execFile)(
    node,
    [...WORKER_NODE_FLAGS, `--import=${CPU_AT_EXIT}`, bundle, WARM_COMPILE_CACHE_FLAG],
    {
      env: { PATH: process.env["PATH"] ?? "", NODE_ENV: "production", NODE_OPTIONS: "--enable-source-maps" },
    },
  );
  const ms = /cpu-at-exit ([\d.]+)/.exec(stderr)?.[1];
  if (ms === undefined) throw new Error(`no CPU figure from ${bundle}: ${stderr}`);
  return Number(ms);
}

/** Builds the echo example with the bundler of `tree` (its dist/cli/bundle.js) into `outDir`. */
export async function bundleWith(tree: string, outDir: string): Promise<string> {
  const { bundleHandler } = (await import(pathToFileURL(join(tree, "dist", "cli", "bundle.js")).href)) as {
    bundleHandler: (o: { handlerPath: string; outDir: string }) => Promise<{ bundlePath: string }>;
  };
  const built = await bundleHandler({ handlerPath: join(tree, "examples", "echo", "handler.ts"), outDir });
  return built.bundlePath;
}

/** How {@link compareColdStarts} starts the two bundles. */
export interface ColdCompareOptions {
  /** Rounds, alternating the bundles (ABBA). */
  readonly rounds: number;
  /** Starts of one bundle per round. */
  readonly runs: number;
  /** The Node binary that runs both bundles. */
  readonly node: string;
  /** Also measure the CPU of loading each bundle and its handler, `runs` times a round. */
  readonly loadCpu: boolean;
}

/**
 * Starts two built bundles in turn (`runs` starts of one, then of the other, ABBA over the
 * rounds) against one harness, each start measured as bench/cold-start.ts measures it (idle RSS
 * 100 ms after the first take), and pools each side's figures over the rounds; for this script
 * and `npm run bench -- --before`.
 */
export async function compareColdStarts(
  bundles: Readonly<Record<Side, string>>,
  options: ColdCompareOptions,
): Promise<Record<Side, Pooled>> {
  const empty = (): Pooled => ({
    loadCpuMs: [],
    runletMs: [],
    runletCpuMs: [],
    cpuToTakeMs: [],
    takeMs: [],
    idleRssMiB: [],
  });
  const pooled: Record<Side, Pooled> = { before: empty(), after: empty() };
  await using harness = await startHarness({ takeTimeoutMs: 5_000, endpoints: [{ id: "bench" }] });
  await alternate(options.rounds, async (side, round) => {
    process.stderr.write(`cold-compare: round ${round + 1}/${options.rounds}, ${side}…\n`);
    const figures = await measureColdStart({
      bundlePath: bundles[side],
      runs: options.runs,
      idleMs: 100,
      node: options.node,
      harness,
    });
    pool(pooled[side], figures);
    if (options.loadCpu) {
      for (let i = 0; i < options.runs; i++)
        pooled[side].loadCpuMs.push(await loadCpuMs(bundles[side], options.node));
    }
  });
  return pooled;
}

const fmt = (value: number | undefined, unit = "ms"): string =>
  value === undefined ? "—" : `${Math.round(value * 10) / 10} ${unit}`;

function change(before: number | undefined, after: number | undefined): string {
  if (before === undefined || after === undefined) return "";
  const pct = ((after - before) / before) * 100;
  return `${pct <= 0 ? "" : "+"}${pct.toFixed(0)} %`;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      before: { type: "string" },
      after: { type: "string" },
      rounds: { type: "string" },
      "runs-per-round": { type: "string" },
      node: { type: "string" },
    },
  });
  if (values.before === undefined) {
    process.stderr.write(
      "usage: node bin/run-ts.mjs bench/cold-compare.ts --before <tree> [--after <tree>] [--rounds 5] [--node <bin>]\n",
    );
    return 2;
  }
  const trees = { before: resolve(values.before), after: resolve(values.after ?? ROOT) };
  const rounds = Number(values.rounds ?? 5);
  const runs = Number(values["runs-per-round"] ?? 3);
  const node = values.node === undefined ? process.execPath : resolve(values.node);
  const dir = await mkdtemp(join(tmpdir(), "runlet-cold-compare-"));
  try {
    const bundles = {
      before: await bundleWith(trees.before, join(dir, "before")),
      after: await bundleWith(trees.after, join(dir, "after")),
    };
    const pooled = await compareColdStarts(bundles, { rounds, runs, node, loadCpu: true });
    const m = (side: Side, key: keyof Pooled) => median(pooled[side][key]);
    const rows: Array<[string, keyof Pooled]> = [
      ["CPU of loading the bundle and handler (--warm-compile-cache)", "loadCpuMs"],
      ["runlet's own phase (process start → ready to set up), wall", "runletMs"],
      ["  CPU used by then (`cpuMs` of `worker ready`, where reported)", "runletCpuMs"],
      ["CPU to the first take (all threads)", "cpuToTakeMs"],
      ["spawn → first take, wall", "takeMs"],
      ["idle RSS after the first take (all threads), MiB", "idleRssMiB"],
    ];
    const out = [
      `node: ${(await promisify(execFile)(node, ["--version"])).stdout.trim()} (${node})`,
      `before: ${trees.before}`,
      `after:  ${trees.after}`,
      `${rounds} rounds × ${runs} starts each, alternating; medians:`,
      "",
    ];
    for (const [label, key] of rows) {
      const unit = key === "idleRssMiB" ? "MiB" : "ms";
      out.push(
        `${label.padEnd(64)} ${fmt(m("before", key), unit).padStart(9)} → ${fmt(m("after", key), unit).padStart(9)}  ${change(m("before", key), m("after", key))}`,
      );
    }
    const after = m("after", "runletMs");
    out.push(
      "",
      `runlet's own phase against its ${RUNLET_PHASE_TARGET_MS} ms target: ${fmt(after)} wall — ${
        after === undefined ? "not reported" : after <= RUNLET_PHASE_TARGET_MS ? "met" : "not met"
      } on this machine now (wall times grow with the machine's load; compare the CPU rows)`,
    );
    process.stdout.write(`${out.join("\n")}\n`);
    return 0;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
