import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Harness } from "../../src/harness/index.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A `runlet start` child process and what it printed. */
export interface RunletChild {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs `runlet start <file> [...args]` as a real child process against endpoint "local" of `h`,
 * with the platform's environment and none of the parent's `RUNPOD_*` variables.
 */
export function startRunletChild(
  h: Harness,
  file: string,
  options: { podId?: string; env?: Record<string, string>; args?: readonly string[] } = {},
): RunletChild {
  const inherited: Record<string, string> = {};
  // RUNPOD_SKIP_*: the test run turns the built-in fitness checks off (vitest.config.ts).
  for (const [k, v] of Object.entries(process.env))
    if ((!k.startsWith("RUNPOD_") || k.startsWith("RUNPOD_SKIP_")) && v !== undefined) inherited[k] = v;
  const child = spawn(process.execPath, ["bin/runlet.mjs", "start", file, ...(options.args ?? [])], {
    cwd: ROOT,
    env: { ...inherited, ...h.workerEnv("local", { podId: options.podId ?? "pod-child" }), ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const append = (d: Buffer) => {
    text += d.toString();
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => text, exited };
}

/** Kills the child if it still runs and waits for it to be gone. */
export async function stopRunletChild(c: RunletChild): Promise<void> {
  if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill("SIGKILL");
  await c.exited;
}
