import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { pipeline, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { SpawnedWorker, WorkerSpawner } from "../options.js";
import { readLines } from "./child-lines.js";
import { startupUpdateOfLine } from "./worker-startup.js";

/** Options of {@link processSpawner}. */
export interface ProcessSpawnerOptions {
  /**
   * Environment the child starts from, before the platform variables are added (usually
   * `process.env`, passed by the caller: library code never reads it itself).
   */
  readonly baseEnv: Readonly<Record<string, string | undefined>>;
  /**
   * Where the child's stdout and stderr go, as human lines. @default discarded (the child then
   * logs JSON lines, which the spawner reads to follow its start-up)
   */
  readonly output?: NodeJS.WritableStream;
  /** After SIGTERM, how long the child may take to exit before SIGKILL, ms. @default 10000 */
  readonly killAfterMs?: number;
  /** The runlet CLI to run. @default this package's bin/runlet.mjs */
  readonly cliPath?: string;
}

const DEFAULT_CLI = fileURLToPath(new URL("../../../bin/runlet.mjs", import.meta.url));

/**
 * A {@link WorkerSpawner} that runs `runlet start <handlerPath>` as a child process with the
 * platform's variables (docs/protocol.md, "Environment"), the way the platform runs a worker's container.
 * Without `output`, it follows the child's start-up from its log lines on stdout (`phase`,
 * `setupProgress`, `worker ready`) and reports it to the harness, so the worker shows as starting
 * until it is ready (docs/harness.md, "Workers starting").
 *
 * @example
 * const spawn = processSpawner("src/handler.ts", { baseEnv: process.env });
 * await startHarness({ endpoints: [{ id: "e", spawn, minWorkers: 1 }] });
 */
export function processSpawner(handlerPath: string, options: ProcessSpawnerOptions): WorkerSpawner {
  const killAfterMs = options.killAfterMs ?? 10_000;
  return async (env, report) => {
    // Without `output`, nobody reads the child's lines but the spawner: they are JSON (platform
    // mode, as RUNPOD_ENDPOINT_ID gives on the platform), and their start-up lines say when the
    // worker is ready. With `output`, they are the human lines it is given, and readiness is
    // not followed (the worker counts as ready once it connects).
    const follow = options.output === undefined;
    const endpointId = /\/v2\/([^/]+)\//.exec(env["RUNPOD_WEBHOOK_GET_JOB"] ?? "")?.[1];
    const child = spawn(process.execPath, [options.cliPath ?? DEFAULT_CLI, "start", handlerPath], {
      env: {
        ...options.baseEnv,
        ...env,
        ...(follow ? { RUNPOD_ENDPOINT_ID: decodeURIComponent(endpointId ?? "endpoint") } : {}),
      },
      stdio: ["ignore", "pipe", follow ? "ignore" : "pipe"],
    });
    if (options.output !== undefined) {
      const output = options.output;
      for (const stream of [child.stdout, child.stderr]) {
        // The output is shared by every worker and is the caller's (its errors are the caller's to
        // hear): each child's stream goes through a writer of its own, which stream.pipeline ends
        // or destroys with the child's stream while the output stays open.
        if (stream !== null) pipeline(stream, forwardTo(output), () => undefined);
      }
    } else if (child.stdout !== null) {
      report({ type: "starting" });
      readLines(child.stdout, (line) => {
        const update = startupUpdateOfLine(line);
        if (update !== undefined) report(update);
      });
    }
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    return childWorker(child, killAfterMs);
  };
}

function childWorker(child: ChildProcess, killAfterMs: number): SpawnedWorker {
  let closing: Promise<void> | undefined;
  const exited = child.exitCode !== null || child.signalCode !== null;
  const exit = exited ? Promise.resolve() : once(child, "exit");
  return {
    exited: exit,
    close() {
      closing ??= (async () => {
        if (exited || child.exitCode !== null || child.signalCode !== null) return;
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
        try {
          await exit;
        } finally {
          clearTimeout(timer);
        }
      })();
      return closing;
    },
  };
}

/** A writer that passes what it is given on to `output`, waiting on its backpressure, and never ends it. */
function forwardTo(output: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (output.write(chunk)) done();
      else output.once("drain", () => done());
    },
  });
}
