import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { processSpawner, startHarness } from "../../src/harness/index.js";

const CLI = fileURLToPath(new URL("../../bin/runlet.mjs", import.meta.url));
const HANDLER = fileURLToPath(new URL("../fixtures/upper-handler.ts", import.meta.url));

/** Collects a child's stdout and resolves once `done(text)` holds. */
function readUntil(
  child: ChildProcess,
  done: (text: string) => boolean,
  timeoutMs = 20_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`timed out; output so far:\n${text}`)), timeoutMs);
    child.stdout?.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (done(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}; output:\n${text}`));
    });
  });
}

/** Parses the `export NAME='value'` lines printed for one endpoint. */
function exportsOf(text: string, endpointId: string): Record<string, string> {
  const section = text.split(`endpoint ${endpointId}:`)[1]?.split("\n\n")[0] ?? "";
  const env: Record<string, string> = {};
  for (const match of section.matchAll(/export (\w+)='([^']*)'/g)) env[match[1]!] = match[2]!;
  return env;
}

describe("runlet harness (CLI) and child-process workers", () => {
  it("prints the key and per-endpoint worker variables; a runlet start worker connects and serves jobs", async () => {
    const harness = spawn(
      process.execPath,
      [CLI, "harness", "-e", "alpha", "--endpoint", "beta", "--api-key", "cli-key"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let worker: ChildProcess | undefined;
    try {
      const text = await readUntil(harness, (t) => /endpoint beta:[\s\S]*RUNPOD_POD_ID=.*\n/.test(t));
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(text).toContain("  api key  cli-key\n");
      // The dashboard's link carries the key in its fragment; its data routes need that key.
      const page = /^ {2}dashboard (http:\/\/127\.0\.0\.1:\d+\/_runlet\/)#token=cli-key$/m.exec(text)?.[1];
      expect(page).toBeDefined();
      expect((await fetch(`${page}api/state`)).status).toBe(401);
      const state = await fetch(`${page}api/state`, { headers: { authorization: "Bearer cli-key" } });
      expect(
        ((await state.json()) as { endpoints: Array<{ id: string }> }).endpoints.map((e) => e.id),
      ).toEqual(["alpha", "beta"]);
      const env = exportsOf(text, "alpha");
      expect(env).toEqual({
        RUNPOD_WEBHOOK_GET_JOB: `${url}/v2/alpha/job-take/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
        RUNPOD_WEBHOOK_POST_OUTPUT: `${url}/v2/alpha/job-done/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
        RUNPOD_WEBHOOK_POST_STREAM: `${url}/v2/alpha/job-stream/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
        RUNPOD_WEBHOOK_PING: `${url}/v2/alpha/ping/$RUNPOD_POD_ID?gpu=$RUNPOD_GPU_TYPE_ID`,
        RUNPOD_AI_API_KEY: "cli-key",
        RUNPOD_POD_ID: "alpha-worker-1",
        RUNPOD_POD_HOSTNAME: "alpha-worker-1",
        RUNPOD_GPU_TYPE_ID: "LOCAL",
      });
      expect(exportsOf(text, "beta")).toMatchObject({ RUNPOD_POD_ID: "beta-worker-1" });

      worker = spawn(process.execPath, [CLI, "start", HANDLER], {
        env: { ...process.env, ...env },
        stdio: ["ignore", "ignore", "pipe"],
      });
      const auth = { authorization: "Bearer cli-key", "content-type": "application/json" };
      const res = await fetch(`${url}/v2/alpha/runsync?wait=60000`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ input: { text: "cli" } }),
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: "COMPLETED", output: { text: "CLI" } });
      const health = (await (await fetch(`${url}/v2/alpha/health`, { headers: auth })).json()) as {
        workers: { idle: number; running: number };
        jobs: { completed: number };
      };
      expect(health.jobs.completed).toBe(1);
      // One worker, under one id, whichever placeholder each of its templates used.
      expect(health.workers.idle + health.workers.running).toBe(1);
    } finally {
      worker?.kill("SIGTERM");
      if (worker !== undefined && worker.exitCode === null) await once(worker, "exit");
      harness.kill("SIGINT");
    }
    const [code] = (await once(harness, "exit")) as [number | null];
    expect(code).toBe(0);
  });

  it("refuses an unknown flag with exit code 2", async () => {
    const child = spawn(process.execPath, [CLI, "harness", "--nope"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).toBe(2);
    // The middle of the message is Node's own parseArgs text; the flag and the usage hint are runlet's.
    expect(stderr).toMatch(
      /^runlet harness: Unknown option '--nope'\.[^\n]* \(RUNLET_CLI_USAGE\)\nRun `runlet harness --help` for usage\.\n$/,
    );
  });

  it("scales an endpoint with real child-process workers started with the platform's variables", async () => {
    await using h = await startHarness({
      endpoints: [
        {
          id: "proc",
          spawn: processSpawner(HANDLER, { baseEnv: process.env, killAfterMs: 5_000 }),
          minWorkers: 1,
        },
      ],
    });
    await h.workersStarted("proc");
    const res = await fetch(`${h.url}/v2/proc/runsync?wait=60000`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "child" } }),
    });
    expect(await res.json()).toMatchObject({
      status: "COMPLETED",
      output: { text: "CHILD" },
      workerId: "proc-worker-1",
    });
  });
});
