import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { WORKER_NODE_FLAGS } from "../src/cli/dockerfile.js";

/** The repository root (bench/ sits right under it). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** A worker running as its own process, as it runs in a container. */
export interface WorkerProcess {
  readonly pid: number;
  /** Resident set size now, bytes (undefined once it exited or where the OS does not say). */
  rssBytes(): number | undefined;
  /** Peak resident set size so far, bytes (Linux `VmHWM`; undefined elsewhere). */
  peakRssBytes(): number | undefined;
  /** What the process wrote to stderr (the last 64 KiB). */
  stderr(): string;
  /** Resolves with the exit code (or the signal name) once it has exited. */
  readonly exited: Promise<number | string>;
  /** SIGTERM, then SIGKILL after `killAfterMs`; resolves with how it exited. Idempotent. */
  stop(killAfterMs?: number): Promise<number | string>;
}

/** Reads one `kB` field of /proc/<pid>/status, in bytes. */
function procStatusBytes(pid: number, field: "VmRSS" | "VmHWM"): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m").exec(text);
    return match === null ? undefined : Number(match[1]) * 1024;
  } catch {
    // Not Linux, or the process is gone: the figure is simply unavailable.
    return undefined;
  }
}

/**
 * Node flags for every process the bench starts, from `BENCH_NODE_ARGS` (space-separated), e.g.
 * `--cpu-prof --cpu-prof-dir=prof`: Node refuses `--cpu-prof` in NODE_OPTIONS, and a profile of
 * the worker under the bench's own load is how docs/benchmarks.md's "Where the time goes" is made.
 */
function workerNodeArgs(): string[] {
  return (process.env["BENCH_NODE_ARGS"] ?? "").split(" ").filter((arg) => arg !== "");
}

/**
 * Starts `node <script> <args>` from the repository root (or `root`, another checkout's) with
 * `env` added to this process's environment; stdout is discarded (the worker's per-job log
 * lines), stderr kept for errors.
 */
export function spawnNode(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  nodeFlags: readonly string[] = [],
  root: string = ROOT,
): WorkerProcess {
  const argv = [...nodeFlags, ...workerNodeArgs(), join(root, script), ...args];
  const child: ChildProcess = spawn(process.execPath, argv, {
    cwd: root,
    // No built-in fitness checks (docs/fitness.md): their network check would leave loopback, and
    // the figures measure runlet, not this machine's memory, disk and route out.
    env: { RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true", RUNPOD_SKIP_GPU_CHECK: "true", ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let errText = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    errText = (errText + chunk).slice(-65_536);
  });
  const exited = new Promise<number | string>((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"));
  });
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  let stopping: Promise<number | string> | undefined;
  const pid = child.pid ?? -1;
  return {
    pid,
    rssBytes: () => (gone ? undefined : procStatusBytes(pid, "VmRSS")),
    peakRssBytes: () => (gone ? undefined : procStatusBytes(pid, "VmHWM")),
    stderr: () => errText,
    exited,
    stop(killAfterMs = 5_000) {
      stopping ??= (async () => {
        if (!gone) child.kill("SIGTERM");
        const timer = setTimeout(() => {
          if (!gone) child.kill("SIGKILL");
        }, killAfterMs);
        try {
          return await exited;
        } finally {
          clearTimeout(timer);
        }
      })();
      return stopping;
    },
  };
}

/**
 * `runlet start <handler>` as a child process, connected through `env` (the harness's workerEnv),
 * under the Node flags the image starts its worker with (WORKER_NODE_FLAGS), so its memory and
 * CPU figures are those of a deployed worker. `root`: the checkout whose worker runs (another
 * one's, with its dist/ built, to measure two harnesses against the same worker). @default this one
 */
export function spawnRunletWorker(
  handler: string,
  env: Record<string, string>,
  root?: string,
): WorkerProcess {
  return spawnNode("bin/runlet.mjs", ["start", handler], env, WORKER_NODE_FLAGS, root);
}

/** Resets a process's peak RSS (Linux `clear_refs` 5) so the next peak is this phase's; false where unsupported. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    // Not Linux, or not allowed: the caller falls back to the lifetime peak.
    return false;
  }
}
