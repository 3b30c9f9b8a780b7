/**
 * `npm run bench -- --before <checkout>`: another checkout's worker against this one's, in the
 * same run, each section on one harness with the two sides alternating A B, B A (ABBA): bundled
 * cold start, job throughput at each level against its ceiling, the short-string and OpenAI
 * streams, one large item, and idle RSS after 20 jobs. Each section is the core of a focused
 * script (bench/cold-compare.ts, bench/large-item.ts, bench/idle-rss.ts) or of a figure of the
 * full bench (bench/figures/throughput.ts, streaming.ts, openai.ts), called here for both sides.
 */
import { execFileSync } from "node:child_process";
import { existsSync, realpathSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { bundleWith, compareColdStarts } from "./cold-compare.js";
import { compareOpenAI } from "./figures/openai.js";
import { compareLargeItem, compareSmallStream } from "./figures/streaming.js";
import { compareThroughput } from "./figures/throughput.js";
import { compareIdleRss, IDLE_RSS_JOBS } from "./idle-rss.js";
import type { BenchOptions } from "./options.js";
import type { CompareFigure, CompareResults, CompareTree } from "./results.js";
import { figure, type Side } from "./stats.js";
import { ROOT } from "./worker-process.js";

/** What a `--before` checkout must hold, and what to do when it does not. */
const REQUIRED: ReadonlyArray<{ readonly path: string; readonly fix: string }> = [
  { path: "dist", fix: "not built: run `npm run build` there" },
  { path: "dist/cli/bundle.js", fix: "the bundler the cold start uses: run `npm run build` there" },
  { path: "bin/runlet.mjs", fix: "the CLI that starts its worker" },
  { path: "node_modules", fix: "link this checkout's node_modules there or run `npm ci` there" },
  { path: "examples/echo/handler.ts", fix: "the handler its cold start bundles" },
  { path: "bench/handlers/trivial.ts", fix: "the job figures' handler" },
  { path: "bench/handlers/stream.ts", fix: "the stream figures' handler" },
  { path: "bench/handlers/openai.ts", fix: "the OpenAI stream's handler" },
];

/**
 * The absolute path of a `--before` checkout, after checking it holds what the comparison runs;
 * throws an error naming the path and each missing part otherwise (before anything is measured).
 */
export function checkBeforeTree(dir: string): string {
  const root = resolve(dir);
  let isDir = false;
  try {
    isDir = statSync(root).isDirectory();
  } catch {
    // Missing: said below.
  }
  if (!isDir) throw new Error(`--before ${root}: no such directory (a runlet checkout with its dist/ built)`);
  const missing = REQUIRED.filter((r) => !existsSync(join(root, r.path)));
  // A missing dist/ explains its files: name it alone.
  const named = missing.some((m) => m.path === "dist")
    ? missing.filter((m) => !m.path.startsWith("dist/"))
    : missing;
  if (named.length > 0) {
    throw new Error(
      `--before ${root} is not a checkout the comparison can run; missing:\n${named
        .map((m) => `  ${m.path}${m.path.includes(".") ? "" : "/"} (${m.fix})`)
        .join("\n")}\n(docs/benchmarks.md, "Before and after in one run", says how to prepare one)`,
    );
  }
  return root;
}

/** A checkout's commit where it is the top of a git work tree, else its path's last name. */
export function describeTree(root: string): CompareTree {
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", root, ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  let commit: string | null = null;
  try {
    // Only the tree's own repository: an extracted archive inside another repository is not that repository's HEAD.
    if (realpathSync(git("rev-parse", "--show-toplevel")) === realpathSync(root))
      commit = git("rev-parse", "HEAD");
  } catch {
    // Not a git tree (an extracted archive): named by its path.
  }
  return { commit, name: commit === null ? basename(root) : commit.slice(0, 7) };
}

/** A figure of both sides, from each side's runs; none when either side has no runs (e.g. no /proc). */
function both(
  id: string,
  label: string,
  unit: string,
  runs: Readonly<Record<Side, readonly number[]>>,
): CompareFigure[] {
  if (runs.before.length === 0 || runs.after.length === 0) return [];
  return [
    {
      id,
      label,
      unit,
      before: figure(id, label, unit, runs.before),
      after: figure(id, label, unit, runs.after),
    },
  ];
}

/** Each side's runs mapped through `pick`. */
function map<T>(
  runs: Readonly<Record<Side, readonly T[]>>,
  pick: (run: T) => number,
): Record<Side, number[]> {
  return { before: runs.before.map(pick), after: runs.after.map(pick) };
}

/**
 * Measures the worker of `beforeRoot` (checked with {@link checkBeforeTree}) against this
 * checkout's, section by section, with the sizes of `options`.
 */
export async function measureCompare(
  beforeRoot: string,
  options: BenchOptions["compare"],
  progress: (line: string) => void = () => {},
): Promise<CompareResults> {
  const t0 = performance.now();
  const roots = { before: beforeRoot, after: ROOT };
  const { rounds } = options;
  const figures: CompareFigure[] = [];
  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    progress(`bench: compare, ${name}…`);
    const s = performance.now();
    const out = await fn();
    progress(`bench: compare, ${name} done in ${((performance.now() - s) / 1000).toFixed(1)} s`);
    return out;
  };

  const cold = await step("bundled cold start", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runlet-bench-compare-"));
    try {
      const bundles = {
        before: await bundleWith(roots.before, join(dir, "before")),
        after: await bundleWith(roots.after, join(dir, "after")),
      };
      const node = process.execPath;
      return await compareColdStarts(bundles, {
        rounds,
        runs: options.coldStartsPerRound,
        node,
        loadCpu: false,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
  figures.push(
    ...both("cold.firstTake", "bundled worker (echo), spawn → first take", "ms", {
      before: cold.before.takeMs,
      after: cold.after.takeMs,
    }),
    ...both("cold.cpuToTake", "  CPU to the first take (all threads)", "ms", {
      before: cold.before.cpuToTakeMs,
      after: cold.after.cpuToTakeMs,
    }),
    ...both("cold.idleRss", "  idle RSS 100 ms after the first take", "MiB", {
      before: cold.before.idleRssMiB,
      after: cold.after.idleRssMiB,
    }),
  );

  const levels = await step("job throughput", () => compareThroughput(roots, options, rounds));
  for (const { concurrency, runs } of levels) {
    const c = `c${concurrency}`;
    figures.push(
      ...both(
        `throughput.${c}`,
        `jobs/s, concurrency ${concurrency}`,
        "jobs/s",
        map(runs, (r) => r.perSecond),
      ),
      ...both(
        `throughput.${c}.ratio`,
        "  ÷ ceiling (paired runs)",
        "x",
        map(runs, (r) => r.ratio),
      ),
      ...both(
        `throughput.${c}.workerCpu`,
        "  worker CPU per job",
        "ms",
        map(runs, (r) => r.workerCpu),
      ),
    );
  }

  const items = options.streamItems;
  const small = await step("short-string stream", () => compareSmallStream(roots, items, rounds));
  figures.push(
    ...both(
      "stream.small.runlet",
      `stream, ${items.toLocaleString("en-US")} short strings`,
      "items/s",
      map(small, (r) => r.perSecond),
    ),
    ...both(
      "stream.small.ceilingRatio",
      "  ÷ ceiling (paired runs)",
      "x",
      map(small, (r) => r.ratio),
    ),
    ...both(
      "stream.small.workerCpu",
      "  worker CPU per item",
      "ms",
      map(small, (r) => r.workerCpu),
    ),
  );

  const tokens = options.openaiTokens;
  const openai = await step("OpenAI stream", () => compareOpenAI(roots, tokens, rounds));
  figures.push(
    ...both(
      "stream.openai.perToken",
      `openai client stream, ${tokens.toLocaleString("en-US")} tokens, streamCoalesceMs 0`,
      "tokens/s",
      openai,
    ),
  );

  const bytes = options.largeBytes;
  const large = await step("large item", () => compareLargeItem(roots, bytes, rounds));
  figures.push(
    ...both(
      "stream.large.throughput",
      `stream, one ${Math.round(bytes / 1_000_000)} MB string`,
      "MB/s",
      map(large, (r) => r.mbps),
    ),
    ...both(
      "stream.large.ratio",
      "  ÷ ceiling (paired runs)",
      "x",
      map(large, (r) => r.ratio),
    ),
  );

  const idle = await step("idle RSS", () => compareIdleRss(roots, options.idleStarts, options.idleSettleMs));
  const MiB = 1_048_576;
  figures.push(
    ...both(
      "memory.idleFresh",
      "worker RSS, idle before any job",
      "MiB",
      map(idle, (r) => r.idleBytes / MiB),
    ),
    ...both(
      "memory.idleAfterJobs",
      `worker RSS, idle after ${IDLE_RSS_JOBS} jobs`,
      "MiB",
      map(idle, (r) => r.afterJobsBytes / MiB),
    ),
  );

  return {
    before: describeTree(roots.before),
    after: describeTree(roots.after),
    options,
    figures,
    durationMs: Math.round(performance.now() - t0),
  };
}
