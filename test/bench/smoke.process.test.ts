import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { QUICK_OPTIONS } from "../../bench/options.js";

/** The repository root. */
const ROOT = join(import.meta.dirname, "..", "..");

/** Runs `node bin/run-ts.mjs bench/run.ts <args>` from the repository root. */
function runBenchProcess(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["bin/run-ts.mjs", "bench/run.ts", ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Each job throughput figure comes with its ceiling, the ratio and the CPU per job of each side. */
const throughputIds = (level: string) =>
  ["", ".ceiling", ".ratio", ".workerCpu", ".harnessCpu"].map((suffix) => `throughput.${level}${suffix}`);

const FIGURE_IDS = [
  ...throughputIds("c1"),
  ...throughputIds("c8"),
  "start.firstTake",
  "overhead.p50",
  "overhead.p50.floor",
  "overhead.p50.ratio",
  "overhead.p99",
  "overhead.p99.floor",
  "overhead.p99.ratio",
  "stream.small.runlet",
  "stream.small.ceiling",
  "stream.small.ceilingRatio",
  "stream.small.workerCpu",
  "stream.small.harnessCpu",
  "stream.small.baseline",
  "stream.small.ratio",
  "stream.small.coalesced",
  "stream.large.throughput",
  "stream.large.ceiling",
  "stream.large.ratio",
  "stream.large.peakRss",
  "stream.openai.perToken",
  "stream.openai.batched",
  "stream.openai.ttftPerToken",
  "stream.openai.ttftBatched",
  ...QUICK_OPTIONS.loadBalancing.levels.flatMap((c) =>
    ["", ".ceiling", ".ratio"].map((suffix) => `lb.c${c}${suffix}`),
  ),
  "s3.upload",
  "s3.download",
  ...[1, 8, 32].flatMap((size) =>
    [
      "",
      ".ideal",
      ".ratio",
      ".p50",
      ".p50.ideal",
      ".p99",
      ".p99.ideal",
      ".wait",
      ".workerCpu",
      ".harnessCpu",
    ].map((suffix) => `batch.s${size}${suffix}`),
  ),
  "batch.window.p50",
  "memory.idle",
  "memory.warm",
  "memory.warmUp",
  "memory.after",
  "memory.growth",
  "memory.heapGrowth",
  "telemetry.firstTake.off",
  "telemetry.firstTake.on",
  "telemetry.firstTake.added",
  "telemetry.idle.off",
  "telemetry.idle.on",
  "telemetry.idle.added",
  "soak.rssSlope",
  "soak.heapSlope",
  "soak.handlesSlope",
  "soak.loopDelayP99Slope",
  "soak.loopDelayP99",
  "soak.jobs",
  "soak.unexpected",
  "cache.coldStart",
  "cache.warmStart",
  "cache.sync",
];

/** The comparison's figures, in order, for the levels `QUICK_OPTIONS.compare` measures. */
const COMPARE_IDS = [
  ...(process.platform === "linux"
    ? ["cold.firstTake", "cold.cpuToTake", "cold.idleRss"]
    : ["cold.firstTake", "cold.idleRss"]),
  ...QUICK_OPTIONS.compare.concurrency.flatMap((c) =>
    ["", ".ratio", ".workerCpu"].map((suffix) => `throughput.c${c}${suffix}`),
  ),
  "stream.small.runlet",
  "stream.small.ceilingRatio",
  "stream.small.workerCpu",
  "stream.openai.perToken",
  "stream.large.throughput",
  "stream.large.ratio",
  "memory.idleFresh",
  "memory.idleAfterJobs",
];

/** Checks `--before`'s section: both trees named, both sides of every figure with finite runs. */
function expectCompare(compare: Record<string, unknown>): void {
  const o = QUICK_OPTIONS.compare;
  expect(compare["options"]).toEqual(o);
  for (const side of ["before", "after"]) {
    const tree = compare[side] as Record<string, unknown>;
    // No path: the results file is committed, and a path is the machine's.
    expect(tree).not.toHaveProperty("root");
    // A clean clone is a git tree; an extracted archive is named by its path.
    if (tree["commit"] === null) expect(tree["name"]).toBe(basename(ROOT));
    else expect(tree["commit"]).toMatch(/^[0-9a-f]{40}$/);
  }
  const figures = compare["figures"] as Array<Record<string, unknown>>;
  expect(figures.map((f) => f["id"])).toEqual(COMPARE_IDS);
  for (const f of figures) {
    const id = String(f["id"]);
    const runs = id.startsWith("cold.")
      ? o.rounds * o.coldStartsPerRound
      : id.startsWith("memory.")
        ? o.idleStarts
        : o.rounds;
    for (const side of ["before", "after"]) {
      const fig = f[side] as Record<string, unknown>;
      expect(fig["runs"], `${id} ${side}`).toHaveLength(runs);
      expect(
        (fig["runs"] as number[]).every((v) => Number.isFinite(v)),
        `${id} ${side}`,
      ).toBe(true);
      expect(Number.isFinite(fig["median"]), `${id} ${side}`).toBe(true);
    }
  }
}

describe("npm run bench (quick smoke run: shape only, never speed)", () => {
  it("runs every figure in --quick mode and --before's comparison (this checkout as the before), prints the tables and writes results JSON of the documented shape", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runlet-bench-smoke-"));
    try {
      const out = join(dir, "results.json");
      const run = await runBenchProcess(["--quick", "--out", out, "--before", ROOT]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain("runlet bench (quick)");
      expect(run.stdout).toContain(`written to ${out}`);
      expect(run.stdout).toContain("before and after in one run");
      const results = JSON.parse(await readFile(out, "utf8")) as Record<string, unknown>;
      expect(Object.keys(results).sort()).toEqual(
        [
          "compare",
          "coldStart",
          "durationMs",
          "figures",
          "machine",
          "memoryWithinBound",
          "mode",
          "options",
          "schema",
        ].sort(),
      );
      expect(results["schema"]).toBe(1);
      expect(results["mode"]).toBe("quick");
      expect(results["options"]).toEqual(QUICK_OPTIONS);
      expect(results["memoryWithinBound"]).toBe(true);
      expect(results["coldStart"]).toEqual({ available: false, reason: "skipped (--quick)" });
      const machine = results["machine"] as Record<string, unknown>;
      expect(typeof machine["cpuModel"]).toBe("string");
      expect(machine["cores"]).toBeGreaterThanOrEqual(1);
      expect(machine["totalMemoryBytes"]).toBeGreaterThan(0);
      expect(machine["node"]).toBe(process.version);
      expect(Number.isNaN(Date.parse(String(machine["date"])))).toBe(false);

      const figures = results["figures"] as Array<Record<string, unknown>>;
      expect(figures.map((f) => f["id"])).toEqual(FIGURE_IDS);
      for (const f of figures) {
        const runs = f["runs"] as number[];
        const expectedRuns = String(f["id"]).startsWith("stream.")
          ? QUICK_OPTIONS.stream.repetitions
          : String(f["id"]).startsWith("memory.")
            ? QUICK_OPTIONS.memory.repetitions
            : String(f["id"]).startsWith("telemetry.")
              ? QUICK_OPTIONS.telemetry.starts
              : String(f["id"]).startsWith("soak.")
                ? 1
                : f["id"] === "start.firstTake"
                  ? QUICK_OPTIONS.throughput.concurrency.length
                  : QUICK_OPTIONS.repetitions;
        expect(runs, String(f["id"])).toHaveLength(expectedRuns);
        expect(
          runs.every((v) => Number.isFinite(v)),
          String(f["id"]),
        ).toBe(true);
        expect(typeof f["label"]).toBe("string");
        expect(typeof f["unit"]).toBe("string");
        expect(f["min"]).toBe(Math.min(...runs));
        expect(f["max"]).toBe(Math.max(...runs));
        expect(f["median"] as number).toBeGreaterThanOrEqual(f["min"] as number);
        expect(f["median"] as number).toBeLessThanOrEqual(f["max"] as number);
      }
      expectCompare(results["compare"] as Record<string, unknown>);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it("refuses a --before that is no directory, or lacks dist/ or node_modules/, naming the path and what is missing, before measuring", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runlet-bench-before-"));
    try {
      const out = join(dir, "results.json");
      const nowhere = join(dir, "no-such-checkout");
      const gone = await runBenchProcess(["--only", "compare", "--quick", "--before", nowhere, "--out", out]);
      expect(gone.code).toBe(2);
      expect(gone.stderr).toContain(`--before ${nowhere}: no such directory`);

      // A tree of sources whose dist/ was never built, and whose node_modules is not there.
      const unbuilt = join(dir, "unbuilt");
      await mkdir(join(unbuilt, "bin"), { recursive: true });
      const bare = await runBenchProcess(["--quick", "--before", unbuilt, "--out", out]);
      expect(bare.code).toBe(2);
      expect(bare.stderr).toContain(`--before ${unbuilt} is not a checkout the comparison can run`);
      expect(bare.stderr).toContain("dist/ (not built: run `npm run build` there)");
      expect(bare.stderr).toContain("node_modules/");
      // Nothing was measured: no progress line, no results file.
      expect(bare.stderr).not.toContain("bench:");
      expect(existsSync(out)).toBe(false);

      // Built, but its node_modules missing: only that is named.
      await mkdir(join(unbuilt, "dist", "cli"), { recursive: true });
      const noModules = await runBenchProcess(["--only", "compare", "--before", unbuilt]);
      expect(noModules.code).toBe(2);
      expect(noModules.stderr).toContain("node_modules/ (link this checkout's node_modules there");
      expect(noModules.stderr).toContain("dist/cli/bundle.js");
      expect(noModules.stderr).not.toContain("dist/ (not built");

      const alone = await runBenchProcess(["--only", "compare", "--quick"]);
      expect(alone.code).toBe(2);
      expect(alone.stderr).toContain("--only compare needs --before <checkout>");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
