import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { QUICK_OPTIONS } from "../../bench/options.js";

/** Runs `node bin/run-ts.mjs bench/run.ts <args>` from the repository root. */
function runBenchProcess(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["bin/run-ts.mjs", "bench/run.ts", ...args], {
      cwd: join(import.meta.dirname, "..", ".."),
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

describe("npm run bench (quick smoke run: shape only, never speed)", () => {
  it("runs every figure in --quick mode, prints the table and writes results JSON of the documented shape", async () => {
    const dir = await mkdtemp(join(tmpdir(), "runlet-bench-smoke-"));
    try {
      const out = join(dir, "results.json");
      const run = await runBenchProcess(["--quick", "--out", out]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain("runlet bench (quick)");
      expect(run.stdout).toContain(`written to ${out}`);
      const results = JSON.parse(await readFile(out, "utf8")) as Record<string, unknown>;
      expect(Object.keys(results).sort()).toEqual(
        [
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
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
