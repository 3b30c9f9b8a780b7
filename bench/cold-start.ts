import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { bundleHandler } from "../src/cli/bundle.js";
import { type Harness, startHarness } from "../src/harness/index.js";

/** Options of {@link measureColdStart}. */
export interface ColdStartOptions {
  /** Node binary that runs the bundle. @default the current one */
  readonly node?: string;
  /** Worker starts measured; the median is reported. @default 10 */
  readonly runs?: number;
  /** How long the worker idles after its first job-take before its RSS is read, in ms. @default 1_000 */
  readonly idleMs?: number;
  /** Longest wait for one worker's first job-take, in ms. @default 30_000 */
  readonly timeoutMs?: number;
}

/** What {@link measureColdStart} measured. */
export interface ColdStartFigures {
  /** Median ms from spawning `node dist/worker.mjs` to its first job-take reaching the harness. */
  readonly coldStartMsMedian: number;
  /** Every run, in order, in ms. */
  readonly coldStartMsRuns: readonly number[];
  /** Size of the echo example's bundle, bytes. */
  readonly bundleBytes: number;
  /** Size of its source map, bytes. */
  readonly sourceMapBytes: number;
  /** Resident memory of an idle worker (after its first job-take and `idleMs`), bytes. */
  readonly idleRssBytes: number;
  /** `process.version` of the Node that ran the bundle. */
  readonly nodeVersion: string;
}

const ECHO = fileURLToPath(new URL("../examples/echo/handler.ts", import.meta.url));
const ENDPOINT = "bench";

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Resident set size of a process in bytes, from /proc (Linux) or `ps`. */
async function rssBytes(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    if (kb !== undefined) return Number(kb) * 1024;
  } catch {
    // No /proc (macOS): ask ps instead.
  }
  const { stdout } = await promisify(execFile)("ps", ["-o", "rss=", "-p", String(pid)]);
  return Number(stdout.trim()) * 1024;
}

/**
 * Waits for the first job-take from `podId` (a batch take counts: echo runs 4 jobs at once);
 * polls the harness's request record every millisecond.
 */
async function firstTake(harness: Harness, podId: string, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  const isTake = (route: string) => route === "job-take" || route === "job-take-batch";
  while (performance.now() < until) {
    if (harness.requests().some((r) => isTake(r.route) && r.path.endsWith(`/${podId}`))) return;
    await sleep(1);
  }
  throw new Error(`no job-take from ${podId} within ${timeoutMs} ms`);
}

/** One worker start; returns ms to its first job-take, and (when asked) its idle RSS. */
async function startOnce(
  harness: Harness,
  bundle: string,
  cwd: string,
  run: number,
  options: Required<ColdStartOptions>,
  readRss: boolean,
): Promise<{ ms: number; rss: number | undefined }> {
  const podId = `bench-${run}`;
  const env = {
    PATH: process.env["PATH"] ?? "",
    ...harness.workerEnv(ENDPOINT, { podId }),
    RUNPOD_ENDPOINT_ID: ENDPOINT,
  };
  const started = performance.now();
  const child = spawn(options.node, [bundle], { cwd, env, stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  try {
    await firstTake(harness, podId, options.timeoutMs);
    const ms = performance.now() - started;
    let rss: number | undefined;
    if (readRss && child.pid !== undefined) {
      await sleep(options.idleMs);
      rss = await rssBytes(child.pid);
    }
    return { ms, rss };
  } finally {
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Builds the echo example with `runlet build`'s bundler and measures: cold start (ms from
 * spawning `node dist/worker.mjs` to its first job-take reaching a harness, median of `runs`),
 * the bundle's size, and an idle worker's RSS. Prints nothing; returns the figures.
 */
export async function measureColdStart(options: ColdStartOptions = {}): Promise<ColdStartFigures> {
  const resolved: Required<ColdStartOptions> = {
    node: options.node ?? process.execPath,
    runs: options.runs ?? 10,
    idleMs: options.idleMs ?? 1_000,
    timeoutMs: options.timeoutMs ?? 30_000,
  };
  const dir = await mkdtemp(join(tmpdir(), "runlet-bench-cold-"));
  try {
    const built = await bundleHandler({ handlerPath: ECHO, outDir: join(dir, "dist") });
    const nodeVersion = (await promisify(execFile)(resolved.node, ["--version"])).stdout.trim();
    await using harness = await startHarness({ takeTimeoutMs: 5_000, endpoints: [{ id: ENDPOINT }] });
    const runs: number[] = [];
    let idleRss = 0;
    for (let i = 0; i < resolved.runs; i++) {
      // The RSS is read on the last run, so earlier runs have warmed the file cache as a restart would.
      const { ms, rss } = await startOnce(
        harness,
        built.bundlePath,
        dir,
        i,
        resolved,
        i === resolved.runs - 1,
      );
      runs.push(Math.round(ms * 10) / 10);
      if (rss !== undefined) idleRss = rss;
    }
    return {
      coldStartMsMedian: median(runs),
      coldStartMsRuns: runs,
      bundleBytes: built.bundleBytes,
      sourceMapBytes: built.mapBytes,
      idleRssBytes: idleRss,
      nodeVersion,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export default measureColdStart;
