import { execFile } from "node:child_process";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { harnessManagement } from "../../src/harness/management-api/index.js";
import type { WorkerSpawner } from "../../src/harness/options.js";
import { startWorker } from "../../src/worker/index.js";
import handler from "./fixtures/echo-handler.js";
import { startRecorder } from "./servers.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = fileURLToPath(new URL("../../bin/runlet.mjs", import.meta.url));
const HANDLER = fileURLToPath(new URL("./fixtures/echo-handler.ts", import.meta.url));
const API_KEY = "deploy-key-abcdef";

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `runlet deploy ...` as a child process. */
function runDeploy(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, "deploy", ...args],
      { cwd: ROOT, env: { ...process.env, RUNPOD_API_KEY: "", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err !== null && typeof err.code !== "number") reject(err);
        else resolve({ code: err === null ? 0 : (err.code as number), stdout, stderr });
      },
    );
  });
}

/** Runs the fixture handler in-process for each worker the harness asks for. */
const spawnInProcess: WorkerSpawner = async (env) => {
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const worker = await startWorker(handler, { env, logDestination: sink, takeTimeoutMs: 2_000 });
  return { close: () => worker.close() };
};

describe("runlet deploy", () => {
  it("creates the template and endpoint on the harness, then a job runs on the new endpoint", async () => {
    const management = harnessManagement({ apiKey: API_KEY, spawn: spawnInProcess });
    await using harness = await startHarness({
      apiKey: API_KEY,
      endpoints: [],
      extraRoutes: management.extraRoutes,
    });
    management.attach(harness);

    const first = await runDeploy(
      [
        HANDLER,
        "--image",
        "me/echo:1",
        "--cpu",
        "cpu3c",
        "--workers-max",
        "2",
        "--env",
        "MODE=fast",
        "--base-url",
        harness.url,
        "--json",
      ],
      { RUNPOD_API_KEY: API_KEY },
    );
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const result = JSON.parse(first.stdout) as Record<string, string>;
    const endpointId = result["endpointId"]!;
    expect(result).toEqual({
      templateId: expect.stringMatching(/^[a-z0-9]{10}$/),
      templateAction: "create",
      endpointId: expect.stringMatching(/^[a-z0-9]{14}$/),
      endpointAction: "create",
      runsyncUrl: `${harness.url}/v2/${endpointId}/runsync`,
      curl: `curl -X POST '${harness.url}/v2/${endpointId}/runsync' -H "Authorization: Bearer $RUNPOD_API_KEY" -H 'Content-Type: application/json' -d '{"input":{}}'`,
    });
    const store = management.routes.store;
    expect(store.template(result["templateId"]!)?.template).toMatchObject({
      name: "echo",
      imageName: "me/echo:1",
      env: { MODE: "fast" },
      isServerless: true,
    });
    const { createdAt: _createdAt, ...endpoint } = store.endpoint(endpointId)!;
    expect(endpoint).toEqual({
      id: endpointId,
      name: "echo",
      templateId: result["templateId"],
      cpu: { id: "cpu3c" },
      workers: { min: 0, max: 2 },
      // The handler's concurrency 4 becomes requests-per-worker scaling; its timeout is sent as is.
      scaling: { type: "REQUEST_COUNT", value: 4 },
      executionTimeoutMs: 120_000,
    });
    expect(harness.endpointIds()).toContain(endpointId);

    const answer = await fetch(result["runsyncUrl"]!, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "deployed" } }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ status: "COMPLETED", output: { echo: "DEPLOYED" } });

    // A second deploy finds both by name and updates them in place.
    const second = await runDeploy(
      ["--image", "me/echo:2", "--workers-max", "5", "--base-url", harness.url, "--json"],
      {
        RUNPOD_API_KEY: API_KEY,
      },
    );
    expect(second.code).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({
      templateId: result["templateId"],
      templateAction: "update",
      endpointId,
      endpointAction: "update",
    });
    expect(store.template(result["templateId"]!)?.template.image).toBe("me/echo:2");
    expect(store.endpoint(endpointId)?.workers).toEqual({ min: 0, max: 5 });
    expect(store.endpoints()).toHaveLength(1);
  });

  it("prints the planned requests with the key redacted and sends nothing on --dry-run", async () => {
    await using server = await startRecorder();
    const run = await runDeploy(
      [
        "--image",
        "team/app:3",
        "--gpu",
        "NVIDIA A40",
        "--gpu-count",
        "2",
        "--endpoint-id",
        "ep1",
        "--base-url",
        server.url,
        "--dry-run",
      ],
      { RUNPOD_API_KEY: API_KEY },
    );
    expect(run.code).toBe(0);
    expect(server.requests).toEqual([]);
    expect(run.stdout).not.toContain(API_KEY);
    expect(run.stdout).toContain(`POST ${server.url}/v2/templates\nauthorization: Bearer [redacted]\n`);
    expect(run.stdout).toContain(`PATCH ${server.url}/v2/serverless/ep1\nauthorization: Bearer [redacted]\n`);
    expect(run.stdout).toContain(
      '"templateId": "<id of the template above>",\n  "gpu": {\n    "id": "NVIDIA A40",\n    "count": 2\n  }',
    );
  });

  it("exits 2 with a message naming the flag on bad usage", async () => {
    const cases: Array<[string[], string]> = [
      [
        ["--cpu", "c", "--dry-run"],
        "runlet deploy: --image is required (the container image to deploy) (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--gpu", "g", "--cpu", "c", "--dry-run"],
        "runlet deploy: give --gpu or --cpu, not both (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--cpu", "c", "--workers-max", "two", "--dry-run"],
        'runlet deploy: --workers-max must be an integer ≥ 0, got "two" (RUNLET_CLI_USAGE)\n',
      ],
      [
        ["--image", "a:1", "--cpu", "c"],
        "runlet deploy: no API key: set RUNPOD_API_KEY or pass --api-key (RUNLET_CLI_USAGE)\n",
      ],
    ];
    for (const [args, stderr] of cases) {
      const run = await runDeploy(args);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 2, stderr });
    }
  });
});
