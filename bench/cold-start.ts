import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Harness, startHarness } from "../dist/harness/index.js";
import { bundleHandler } from "../src/cli/bundle.js";
import { WARM_COMPILE_CACHE_FLAG, WORKER_NODE_FLAGS } from "../src/cli/dockerfile.js";

/** Options of {@link measureColdStart}. */
export interface ColdStartOptions {
  /** Node binary that runs the bundle. @default the current one */
  readonly node?: string;
  /** Worker starts measured; the median is reported. @default 10 */
  readonly runs?: number;
  /** How long the worker idles after its first job-take before its RSS is read (every run), in ms. @default 1_000 */
  readonly idleMs?: number;
  /** Longest wait for one worker's first job-take, in ms. @default 30_000 */
  readonly timeoutMs?: number;
  /**
   * Give the worker Node's module compile cache, filled once beforehand with the bundle's
   * `--warm-compile-cache`, as the image build does (Node ≥ 22.1; older Nodes ignore it). @default true
   */
  readonly compileCache?: boolean;
  /** Node flags before the bundle's path, as in the image's CMD. @default WORKER_NODE_FLAGS */
  readonly nodeFlags?: readonly string[];
  /**
   * Measure this bundle, already built, instead of building the echo example (to compare with
   * a bundle an older runlet built); its size is the file's. @default the echo example, built now
   */
  readonly bundlePath?: string;
  /**
   * Start the workers against this harness (it must have an endpoint `bench`) instead of a fresh
   * one, so the starts of two bundles meet the same harness; it is left running. @default a fresh harness
   */
  readonly harness?: Harness;
}

/** What {@link measureColdStart} measured. */
export interface ColdStartFigures {
  /** Median ms from spawning `node dist/worker.mjs` to its first job-take reaching the harness. */
  readonly coldStartMsMedian: number;
  /** Every run, in order, in ms. */
  readonly coldStartMsRuns: readonly number[];
  /**
   * Median CPU time the worker process (all its threads) used from its start to its first
   * job-take, ms: what the start costs, little changed by other processes competing for the
   * cores, unlike the wall-clock figure above. Linux only (`/proc/<pid>/task/<tid>/schedstat`).
   */
  readonly coldStartCpuMsMedian: number | undefined;
  /** Every run's CPU to its first job-take, in order, ms (empty where /proc does not say). */
  readonly coldStartCpuMsRuns: readonly number[];
  /** Size of what the echo example's bundle loads at start (worker.mjs and its static chunks), bytes. */
  readonly bundleBytes: number;
  /** Size of the chunks loaded only on demand (the S3 SDK), bytes. */
  readonly lazyBytes: number;
  /** Size of its source maps, bytes. */
  readonly sourceMapBytes: number;
  /** Median resident memory of the idle worker, all threads (after its first job-take and `idleMs`), bytes. */
  readonly idleRssBytes: number;
  /** Every run's idle RSS, in order, bytes. */
  readonly idleRssBytesRuns: readonly number[];
  /**
   * Median ms of each start-up phase the worker's `worker ready` line reported (docs/worker.md,
   * "Start-up phases"): `runlet` (process start → ready to set up: Node, the bundle, the
   * handler module), `fitness`, `cache`, `sidecar`, `setup` as they ran, `total` (process start →
   * ready, just before the first take).
   */
  readonly phasesMsMedian: Readonly<Record<string, number>>;
  /** Every run's phases, in order. */
  readonly phasesMsRuns: ReadonlyArray<Readonly<Record<string, number>>>;
  /**
   * Median CPU time the worker process had used by the end of runlet's own phase (`runlet`) and by
   * ready (`total`), ms, from the `cpuMs` of its `worker ready` line: on a loaded machine the wall
   * times above measure the machine as much as runlet, these stay close to what the start costs.
   */
  readonly phasesCpuMsMedian: Readonly<Record<string, number>>;
  /** Every run's `cpuMs`, in order. */
  readonly phasesCpuMsRuns: ReadonlyArray<Readonly<Record<string, number>>>;
  /** The target of runlet's own phase (`phasesMsMedian.runlet`), ms (issue 30). */
  readonly runletPhaseTargetMs: number;
  /** `process.version` of the Node that ran the bundle. */
  readonly nodeVersion: string;
}

/** The target of runlet's own start-up phase, process start → ready to set up, ms. */
export const RUNLET_PHASE_TARGET_MS = 100;

const ECHO = fileURLToPath(new URL("../examples/echo/handler.ts", import.meta.url));
const ENDPOINT = "bench";
/** Worker starts so far in this process: each start's pod id is new, also on a shared harness. */
let startCount = 0;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** The median of each phase over the runs that reported it. */
function medianPhases(runs: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> {
  const names = [...new Set(runs.flatMap((r) => Object.keys(r)))];
  return Object.fromEntries(
    names.map((name) => [name, median(runs.flatMap((r) => (r[name] === undefined ? [] : [r[name]])))]),
  );
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

/** CPU time used so far by every thread of a process, ms (Linux); undefined elsewhere. */
async function cpuMs(pid: number): Promise<number | undefined> {
  try {
    let ns = 0;
    for (const tid of await readdir(`/proc/${pid}/task`)) {
      // schedstat: time on a CPU (ns), time waiting for one (ns), slices. A thread that ended meanwhile is skipped.
      const stat = await readFile(`/proc/${pid}/task/${tid}/schedstat`, "utf8").catch(() => "0");
      ns += Number(stat.split(" ")[0]);
    }
    return ns / 1e6;
  } catch {
    return undefined; // No /proc (macOS): the figure is left out.
  }
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

/** {@link ColdStartOptions} with every default applied. */
type ResolvedOptions = Required<Omit<ColdStartOptions, "bundlePath" | "harness">>;

/** The environment the image gives the worker (docs/images.md), without the platform's variables. */
function baseEnv(dir: string, options: ResolvedOptions): Record<string, string> {
  return {
    PATH: process.env["PATH"] ?? "",
    NODE_ENV: "production",
    NODE_OPTIONS: "--enable-source-maps",
    // As bench/worker-process.ts: no built-in fitness checks (their network check leaves loopback).
    RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
    RUNPOD_SKIP_GPU_CHECK: "true",
    ...(options.compileCache ? { NODE_COMPILE_CACHE: join(dir, "compile-cache") } : {}),
  };
}

/** One worker start; returns ms to its first job-take, and (when asked) its idle RSS. */
async function startOnce(
  harness: Harness,
  bundle: string,
  cwd: string,
  options: ResolvedOptions,
  readRss: boolean,
): Promise<{
  ms: number;
  cpuMs: number | undefined;
  rss: number | undefined;
  phases: Record<string, number> | undefined;
  phasesCpu: Record<string, number> | undefined;
}> {
  const podId = `bench-${++startCount}`;
  const env = {
    ...baseEnv(cwd, options),
    ...harness.workerEnv(ENDPOINT, { podId }),
    RUNPOD_ENDPOINT_ID: ENDPOINT,
  };
  const started = performance.now();
  // stdout is read for the `worker ready` line and its phases (JSON lines: RUNPOD_ENDPOINT_ID is set).
  const child = spawn(options.node, [...options.nodeFlags, bundle], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "ignore"],
  });
  let phases: Record<string, number> | undefined;
  let phasesCpu: Record<string, number> | undefined;
  let pending = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    const lines = (pending + chunk).split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      if (phases !== undefined || !line.includes('"worker ready"')) continue;
      const record = JSON.parse(line) as {
        message?: unknown;
        phases?: Record<string, number>;
        cpuMs?: Record<string, number>;
      };
      if (record.message === "worker ready") {
        phases = record.phases;
        phasesCpu = record.cpuMs;
      }
    }
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  try {
    await firstTake(harness, podId, options.timeoutMs);
    const ms = performance.now() - started;
    const cpu = child.pid === undefined ? undefined : await cpuMs(child.pid);
    let rss: number | undefined;
    if (readRss && child.pid !== undefined) {
      await sleep(options.idleMs);
      rss = await rssBytes(child.pid);
    }
    return { ms, cpuMs: cpu, rss, phases, phasesCpu };
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
 * the CPU time that start used, the bundle's size, and the idle worker's RSS, in the image's
 * environment (its CMD's Node flags, `NODE_ENV=production`, `--enable-source-maps`, a warmed
 * compile cache). Prints
 * nothing; returns the figures.
 */
export async function measureColdStart(options: ColdStartOptions = {}): Promise<ColdStartFigures> {
  const resolved: ResolvedOptions = {
    node: options.node ?? process.execPath,
    runs: options.runs ?? 10,
    idleMs: options.idleMs ?? 1_000,
    timeoutMs: options.timeoutMs ?? 30_000,
    compileCache: options.compileCache ?? true,
    nodeFlags: options.nodeFlags ?? WORKER_NODE_FLAGS,
  };
  const dir = await mkdtemp(join(tmpdir(), "runlet-bench-cold-"));
  try {
    const built =
      options.bundlePath === undefined
        ? await bundleHandler({ handlerPath: ECHO, outDir: join(dir, "dist") })
        : {
            bundlePath: options.bundlePath,
            bundleBytes: (await stat(options.bundlePath)).size,
            lazyBytes: 0,
            mapBytes: (await stat(`${options.bundlePath}.map`)).size,
          };
    const nodeVersion = (await promisify(execFile)(resolved.node, ["--version"])).stdout.trim();
    if (resolved.compileCache) {
      await promisify(execFile)(
        resolved.node,
        [...resolved.nodeFlags, built.bundlePath, WARM_COMPILE_CACHE_FLAG],
        {
          cwd: dir,
          env: baseEnv(dir, resolved),
        },
      );
    }
    await using own =
      options.harness === undefined
        ? await startHarness({ takeTimeoutMs: 5_000, endpoints: [{ id: ENDPOINT }] })
        : undefined;
    const harness = options.harness ?? own!;
    const runs: number[] = [];
    const cpu: number[] = [];
    const rss: number[] = [];
    const phases: Array<Record<string, number>> = [];
    const phasesCpu: Array<Record<string, number>> = [];
    for (let i = 0; i < resolved.runs; i++) {
      const once = await startOnce(harness, built.bundlePath, dir, resolved, true);
      runs.push(Math.round(once.ms * 10) / 10);
      if (once.phases !== undefined) phases.push(once.phases);
      if (once.phasesCpu !== undefined) phasesCpu.push(once.phasesCpu);
      if (once.cpuMs !== undefined) cpu.push(Math.round(once.cpuMs * 10) / 10);
      if (once.rss !== undefined) rss.push(once.rss);
    }
    return {
      coldStartMsMedian: median(runs),
      coldStartMsRuns: runs,
      coldStartCpuMsMedian: cpu.length === 0 ? undefined : median(cpu),
      coldStartCpuMsRuns: cpu,
      bundleBytes: built.bundleBytes,
      lazyBytes: built.lazyBytes,
      sourceMapBytes: built.mapBytes,
      idleRssBytes: median(rss),
      idleRssBytesRuns: rss,
      phasesMsMedian: medianPhases(phases),
      phasesMsRuns: phases,
      phasesCpuMsMedian: medianPhases(phasesCpu),
      phasesCpuMsRuns: phasesCpu,
      runletPhaseTargetMs: RUNLET_PHASE_TARGET_MS,
      nodeVersion,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export default measureColdStart;
