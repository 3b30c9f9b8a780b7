import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { pipeline, Writable } from "node:stream";
import type { HandlerDefinition } from "../handler/define-handler.js";
import { describeHandler, type SpawnedWorker, startHarness, type WorkerSpawner } from "../harness/index.js";
import { POD_DEFAULT_PORT, readLbSettings } from "../worker/lb/lb-config.js";
import type { ServeOptions } from "../worker/serve-options.js";

/**
 * The image on a Pod (docs/load-balancing.md, "The image on a Pod"): `MODE_TO_RUN=pod` (or
 * `RUNLET_MODE=pod`, `--mode pod`) starts runlet's harness in this process on `PORT` — the job
 * API, the dashboard (on `PORT_DASHBOARD`, default `PORT` + 1) — and the handler's workers: this
 * same program started again in queue mode against it, so the exact image is what runs.
 */

/** Variables that choose a mode: a Pod's worker gets queue mode instead. */
const MODE_VARIABLES = ["RUNLET_MODE", "MODE_TO_RUN", "PORT", "PORT_HEALTH", "HEALTH_CHECK_PATH"];

/** The arguments this process was started with, without `--mode <mode>` (its workers run in queue mode). */
function workerArgs(): string[] {
  const args = process.argv.slice(1);
  const out: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i]!;
    if (arg === "--mode") {
      i += 1;
      continue;
    }
    if (arg.startsWith("--mode=")) continue;
    out.push(arg);
  }
  return out;
}

/** A writer of its own onto a shared output, which its end leaves open. */
function writerTo(output: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      output.write(chunk, () => callback());
    },
  });
}

/** Starts this program again as a queue worker with the harness's env; its lines go to this process's. */
function selfSpawner(baseEnv: Readonly<Record<string, string | undefined>>): WorkerSpawner {
  return async (env, report) => {
    const childEnv: Record<string, string | undefined> = { ...baseEnv };
    for (const name of MODE_VARIABLES) delete childEnv[name];
    const child: ChildProcess = spawn(process.execPath, [...process.execArgv, ...workerArgs()], {
      env: { ...childEnv, ...env, RUNLET_MODE: "queue" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    report({ type: "starting" });
    const exited = once(child, "close");
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    // Its lines go to this process's own output, which outlives it.
    if (child.stdout !== null) pipeline(child.stdout, writerTo(process.stdout), () => undefined);
    if (child.stderr !== null) pipeline(child.stderr, writerTo(process.stderr), () => undefined);
    let closing: Promise<void> | undefined;
    const worker: SpawnedWorker = {
      exited,
      close: () => {
        closing ??= (async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
          try {
            await exited;
          } finally {
            clearTimeout(timer);
          }
        })();
        return closing;
      },
    };
    return worker;
  };
}

/** Serves `definition` as a harness with its workers on this Pod; resolves with the exit code after SIGTERM/SIGINT. */
export async function servePod(definition: HandlerDefinition, options: ServeOptions): Promise<number> {
  const env = options.env;
  const settings = readLbSettings(env, POD_DEFAULT_PORT);
  const given = env["RUNLET_API_KEY"]?.trim() || env["RUNPOD_API_KEY"]?.trim();
  const apiKey = given || `rl_${randomBytes(18).toString("base64url")}`;
  const endpointId = env["RUNPOD_ENDPOINT_ID"]?.trim() || "local";
  const rawDashboard = env["PORT_DASHBOARD"]?.trim();
  const dashboardPort =
    rawDashboard !== undefined && rawDashboard !== ""
      ? Number(rawDashboard)
      : settings.port === 0
        ? 0
        : settings.port + 1;
  if (!Number.isSafeInteger(dashboardPort) || dashboardPort < 0 || dashboardPort > 65_535) {
    process.stderr.write(
      `runlet: PORT_DASHBOARD must be a port number from 0 to 65535, got ${JSON.stringify(rawDashboard)} (RUNLET_CONFIG_INVALID)\n`,
    );
    return 2;
  }
  const concurrency = typeof definition.concurrency === "number" ? definition.concurrency : 1;
  const harness = await startHarness({
    apiKey,
    host: settings.host,
    port: settings.port,
    allowedHosts: true,
    endpoints: [{ id: endpointId, spawn: selfSpawner(env), minWorkers: 1, maxWorkers: 1 }],
    dashboard: { port: dashboardPort },
  });
  harness.describeEndpoint?.(endpointId, describeHandler(definition));
  process.stdout.write(
    `runlet pod mode: the job API is at ${harness.url}/v2/${endpointId} (${concurrency} job(s) at once per worker)\n` +
      (harness.dashboardUrl === undefined
        ? ""
        : `runlet pod mode: dashboard on port ${new URL(harness.dashboardUrl).port}\n`) +
      (given
        ? "runlet pod mode: the API key is RUNLET_API_KEY (or RUNPOD_API_KEY) from the environment\n"
        : `runlet pod mode: API key (made for this run, shown once): ${apiKey}\n`),
  );
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
  await harness.close();
  return 0;
}
