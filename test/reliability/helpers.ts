import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import type { Harness } from "../../src/harness/index.js";
import { waitFor } from "../support/wait-for.js";

export { waitFor };

/** The repository root. */
export const ROOT = join(import.meta.dirname, "..", "..");

/** A small seeded PRNG (mulberry32): the same seed gives the same fault sequence on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A `runlet start` child process. */
export interface WorkerChild {
  readonly podId: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code, or the signal name when killed by one. */
  readonly exited: Promise<number | string>;
  output(): string;
  /** SIGKILL unless it already exited (safe to call in `finally`). */
  kill(): Promise<void>;
}

/**
 * Starts `node bin/runlet.mjs start <handler> [args]` connected to endpoint "local" of `harness`,
 * with a short heartbeat, and resolves once the harness has seen its first job-take.
 */
export async function startWorkerProcess(
  harness: Harness,
  handler: string,
  options: { podId: string; pingIntervalMs?: number; args?: readonly string[] },
): Promise<WorkerChild> {
  const env = {
    ...process.env,
    ...harness.workerEnv("local", { podId: options.podId, pingIntervalMs: options.pingIntervalMs ?? 200 }),
    RUNPOD_ENDPOINT_ID: "local",
  };
  const child = spawn(process.execPath, ["bin/runlet.mjs", "start", handler, ...(options.args ?? [])], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const keep = (chunk: Buffer) => {
    text = (text + chunk.toString()).slice(-32_768);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let done = false;
  const exited = new Promise<number | string>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true;
      resolve(code ?? signal ?? "unknown");
    });
  });
  const worker: WorkerChild = {
    podId: options.podId,
    child,
    exited,
    output: () => text,
    async kill() {
      if (!done) child.kill("SIGKILL");
      await exited;
    },
  };
  try {
    await waitFor(
      `worker ${options.podId} to make its first job-take`,
      () => {
        if (done) throw new Error(`worker ${options.podId} exited early:\n${text}`);
        return harness
          .requests({ endpointId: "local" })
          .some((r) => r.route.startsWith("job-take") && r.path.includes(options.podId));
      },
      30_000,
    );
  } catch (err) {
    await worker.kill();
    throw err;
  }
  return worker;
}
