import { execFile } from "node:child_process";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { harnessManagement } from "../../src/harness/management-api/index.js";
import type { WorkerSpawner } from "../../src/harness/options.js";
import { startWorker } from "../../src/worker/index.js";
import { startRecorder } from "../support/management-servers.js";
import { type Json, problemsOf } from "./document.js";
import handler from "./fixtures/echo-handler.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BIN = fileURLToPath(new URL("../../bin/runlet.mjs", import.meta.url));
const HANDLER = fileURLToPath(new URL("./fixtures/echo-handler.ts", import.meta.url));
/** A batch handler: one batch at a time (concurrency 1) of up to 2 jobs. */
const BATCH_HANDLER = fileURLToPath(new URL("../fixtures/batch-thread.ts", import.meta.url));
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

/** The planned requests of a `--dry-run --json`. */
function plannedRequests(run: Run): { method: string; url: string; body: Json }[] {
  expect(run.code, run.stderr).toBe(0);
  return (JSON.parse(run.stdout) as { requests: { method: string; url: string; body: Json }[] }).requests;
}

/** The document's request schema of a planned request. */
function schemaOf(request: { method: string; url: string }): string {
  const what = request.url.includes("/templates") ? "Template" : "Endpoint";
  return `${request.method === "POST" ? "Create" : "Update"}${what}Request`;
}

describe("runlet deploy", () => {
  it("creates the template and endpoint on the harness, a job runs on it, and an update rolls out with --wait", async () => {
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
        "cpu3c:2",
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
    const result = JSON.parse(first.stdout) as Record<string, string> & {
      requestUrls: Record<string, string>;
    };
    const endpointId = result["endpointId"]!;
    expect(result).toEqual({
      templateId: expect.stringMatching(/^[a-z0-9]{10}$/),
      templateAction: "create",
      endpointId: expect.stringMatching(/^[a-z0-9]{14}$/),
      endpointAction: "create",
      type: "QUEUE",
      requestUrls: expect.objectContaining({
        runSync: `${harness.url}/v2/${endpointId}/runsync`,
        health: `${harness.url}/v2/${endpointId}/health`,
      }),
      curl: `curl -X POST '${harness.url}/v2/${endpointId}/runsync' -H "Authorization: Bearer $RUNPOD_API_KEY" -H 'Content-Type: application/json' -d '{"input":{}}'`,
    });
    const store = management.routes.store;
    expect(store.template(result["templateId"]!)?.template).toMatchObject({
      name: "echo",
      image: "me/echo:1",
      env: { MODE: "fast" },
      serverless: true,
      startSsh: false,
      startJupyter: false,
      category: "CPU",
    });
    const { createdAt: _createdAt, requestUrls: _urls, ...endpoint } = store.endpoint(endpointId)!;
    expect(endpoint).toEqual({
      id: endpointId,
      name: "echo",
      type: "QUEUE",
      image: "me/echo:1",
      args: "",
      disk: 20,
      ports: [],
      env: { MODE: "fast" },
      registry: null,
      cpu: [{ id: "cpu3c", vcpuCount: 2, memory: 4 }],
      workers: { min: 0, max: 2 },
      // The handler's concurrency 4 becomes requests-per-worker scaling; its timeout goes as `timeout`.
      scaling: { type: "REQUEST_COUNT", requestCount: 4 },
      timeout: 120_000,
      flashboot: "OFF",
      dataCenterIds: [],
      networkVolumes: [],
    });
    expect(harness.endpointIds()).toContain(endpointId);

    const answer = await fetch(result.requestUrls["runSync"]!, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "deployed" } }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ status: "COMPLETED", output: { echo: "DEPLOYED" } });
    const workers = await fetch(`${harness.url}/v2/serverless/${endpointId}/workers`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(problemsOf("ListEndpointWorkersResponse", await workers.json())).toEqual([]);

    const before = harness.workersOf(endpointId).map((w) => w.id);
    expect(before.length).toBeGreaterThan(0);
    // A second deploy finds both by name, updates them in place, and waits for the new release:
    // the workers of the old one are replaced.
    const second = await runDeploy(
      ["--image", "me/echo:2", "--workers-max", "5", "--base-url", harness.url, "--json", "--wait"],
      { RUNPOD_API_KEY: API_KEY },
    );
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({
      templateId: result["templateId"],
      templateAction: "update",
      endpointId,
      endpointAction: "update",
      rollout: { workersOnLatest: expect.any(Number), workersTotal: expect.any(Number) },
    });
    expect(store.template(result["templateId"]!)?.template.image).toBe("me/echo:2");
    expect(store.endpoint(endpointId)).toMatchObject({ image: "me/echo:2", workers: { min: 0, max: 5 } });
    expect(store.releases(endpointId).map((r) => r.version)).toEqual([1, 2]);
    expect(harness.workersOf(endpointId).filter((w) => before.includes(w.id))).toEqual([]);
    expect(store.endpoints()).toHaveLength(1);
  });

  it("plans only bodies the document accepts, as a new user would ask (--dry-run --json)", async () => {
    await using server = await startRecorder();
    const base = ["--base-url", server.url, "--dry-run", "--json"];
    const runs: [string, string[]][] = [
      ["a GPU pool", ["--image", "me/app:1", "--gpu", "ADA_24"]],
      ["a CPU flavour", ["--image", "me/app:1", "--cpu", "cpu5c:4,cpu5g:8"]],
      [
        "queue-delay scaling",
        [
          "--image",
          "me/app:1",
          "--gpu",
          "ADA_24",
          "--scaler",
          "queue-delay",
          "--scaler-value",
          "2",
          "--idle-timeout",
          "30",
        ],
      ],
      [
        "a handler with fixed concurrency",
        [HANDLER, "--image", "me/app:1", "--gpu", "AMPERE_24,ADA_24", "--min-cuda", "12.1"],
      ],
      [
        "an update by ids",
        [
          HANDLER,
          "--image",
          "me/app:2",
          "--gpu",
          "ADA_24",
          "--cuda",
          "12.8,12.6",
          "--template-id",
          "t1",
          "--endpoint-id",
          "e1",
          "--flashboot",
          "--network-volume",
          "vol1",
          "--data-center",
          "US-KS-2",
        ],
      ],
      ["a load-balancing endpoint", [HANDLER, "--image", "me/app:1", "--type", "lb", "--cpu", "cpu5c:2"]],
      ["a batch handler", [BATCH_HANDLER, "--image", "me/app:1", "--cpu", "cpu5c:2"]],
      [
        "a batch handler on a load balancer",
        [BATCH_HANDLER, "--image", "me/app:1", "--type", "lb", "--cpu", "cpu5c:2"],
      ],
    ];
    const bodies: Record<string, { method: string; url: string; body: Json }[]> = {};
    for (const [what, args] of runs) {
      const requests = plannedRequests(await runDeploy([...args, ...base], { RUNPOD_API_KEY: API_KEY }));
      expect(
        requests.map((r) => r.method),
        what,
      ).toHaveLength(2);
      for (const request of requests) expect(problemsOf(schemaOf(request), request.body), what).toEqual([]);
      expect(requests[0]!.body, what).toMatchObject({
        serverless: true,
        startSsh: false,
        startJupyter: false,
      });
      bodies[what] = requests;
    }
    expect(server.requests).toEqual([]);
    expect(bodies["a GPU pool"]![1]!.body).toMatchObject({
      type: "QUEUE",
      gpu: { pools: ["ADA_24"] },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      workers: { min: 0, max: 3 },
    });
    expect(bodies["a CPU flavour"]![0]!.body).toMatchObject({ category: "CPU" });
    expect(bodies["a CPU flavour"]![1]!.body).toMatchObject({
      cpu: [
        { id: "cpu5c", vcpuCount: 4 },
        { id: "cpu5g", vcpuCount: 8 },
      ],
    });
    expect(bodies["queue-delay scaling"]![1]!.body).toMatchObject({
      scaling: { type: "QUEUE_DELAY", queueDelay: 2 },
      workers: { idleTimeout: 30 },
    });
    // The handler's timeout is the endpoint's `timeout`; its concurrency 4, requests per worker.
    expect(bodies["a handler with fixed concurrency"]![1]!.body).toMatchObject({
      timeout: 120_000,
      scaling: { type: "REQUEST_COUNT", requestCount: 4 },
      gpu: { pools: ["AMPERE_24", "ADA_24"], minCudaVersion: "12.1" },
    });
    expect(bodies["an update by ids"]!.map((r) => `${r.method} ${new URL(r.url).pathname}`)).toEqual([
      "PATCH /v2/templates/t1",
      "PATCH /v2/serverless/e1",
    ]);
    expect(bodies["an update by ids"]![1]!.body).toEqual({
      templateId: "t1",
      gpu: { pools: ["ADA_24"], allowedCudaVersions: ["12.8", "12.6"] },
      scaling: { type: "REQUEST_COUNT", requestCount: 4 },
      timeout: 120_000,
      flashboot: "FLASHBOOT",
      networkVolumes: ["vol1"],
      dataCenterIds: ["US-KS-2"],
    });
    expect(bodies["a load-balancing endpoint"]![0]!.body).toMatchObject({
      env: { PORT: "8080" },
      ports: ["8080/http"],
    });
    expect(bodies["a load-balancing endpoint"]![1]!.body).toMatchObject({
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 4 },
    });
    // A batch handler's worker runs concurrency × batch.maxSize jobs at once: 1 × 2.
    for (const what of ["a batch handler", "a batch handler on a load balancer"]) {
      expect(bodies[what]![1]!.body["scaling"], what).toEqual({ type: "REQUEST_COUNT", requestCount: 2 });
    }
  });

  it("resolves a GPU type through the catalog into its pool and the pool's other types as excludedTypes, and says so", async () => {
    await using harness = await startHarness({ apiKey: API_KEY, endpoints: [] });
    const run = await runDeploy(
      ["--image", "me/app", "--gpu", "NVIDIA L4", "--base-url", harness.url, "--dry-run", "--json"],
      { RUNPOD_API_KEY: API_KEY },
    );
    const [, endpoint] = plannedRequests(run);
    expect(endpoint!.body["gpu"]).toEqual({ pools: ["ADA_24"], excludedTypes: ["NVIDIA GeForce RTX 4090"] });
    expect(problemsOf("CreateEndpointRequest", endpoint!.body)).toEqual([]);
    expect(run.stderr).toContain(
      "runlet deploy: gpu: NVIDIA L4 → pool ADA_24, excluding NVIDIA GeForce RTX 4090\n",
    );
    // The untagged image is warned about.
    expect(run.stderr).toContain("runlet deploy: warning: image me/app has no tag");
  });

  it("prints the planned requests with the key redacted and sends nothing on --dry-run", async () => {
    await using server = await startRecorder();
    const run = await runDeploy(
      [
        "--image",
        "team/app:3",
        "--gpu",
        "AMPERE_80",
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
      '{\n  "gpu": {\n    "pools": [\n      "AMPERE_80"\n    ],\n    "count": 2\n  },\n  "templateId": "<id of the template above>"\n}',
    );
  });

  it("exits 2 with a message naming the flag on bad usage", async () => {
    const cases: Array<[string[], string]> = [
      [
        ["--cpu", "cpu5c:2", "--dry-run"],
        "runlet deploy: --image is required (the container image to deploy) (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--gpu", "ADA_24", "--cpu", "cpu5c:2", "--dry-run"],
        "runlet deploy: give --gpu or --cpu, not both (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--cpu", "cpu5c", "--dry-run"],
        'runlet deploy: --cpu expects FLAVOUR:VCPUS entries such as cpu5c:4 (vCPUs an integer ≥ 2), got "cpu5c" (RUNLET_CLI_USAGE)\n',
      ],
      [
        ["--image", "a:1", "--gpu", "ADA_24", "--cuda", "12.8", "--min-cuda", "12.1", "--dry-run"],
        "runlet deploy: give --cuda (an exact set) or --min-cuda (a floor), not both (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--type", "lb", "--cpu", "cpu5c:2", "--scaler", "queue-delay", "--dry-run"],
        "runlet deploy: --type lb scales on request-count (there is no queue to delay) (RUNLET_CLI_USAGE)\n",
      ],
      [
        [
          "--image",
          "a:1",
          "--type",
          "lb",
          "--cpu",
          "cpu5c:2",
          "--port",
          "8000",
          "--env",
          "PORT=9000",
          "--dry-run",
        ],
        "runlet deploy: --port 8000 and --env PORT=9000 disagree: give one (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--gpu", "NVIDIA L4", "--dry-run"],
        "runlet deploy: --gpu NVIDIA L4 is a GPU type, resolved through the catalog: set RUNPOD_API_KEY (or --api-key), or give a pool id such as ADA_24 (RUNLET_CLI_USAGE)\n",
      ],
      [
        ["--image", "a:1", "--cpu", "cpu5c:2", "--workers-max", "two", "--dry-run"],
        'runlet deploy: --workers-max must be an integer ≥ 0, got "two" (RUNLET_CLI_USAGE)\n',
      ],
      [
        ["--image", "a:1", "--cpu", "cpu5c:2"],
        "runlet deploy: no API key: set RUNPOD_API_KEY or pass --api-key (RUNLET_CLI_USAGE)\n",
      ],
    ];
    for (const [args, stderr] of cases) {
      const run = await runDeploy(args);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 2, stderr });
    }
  });
});
