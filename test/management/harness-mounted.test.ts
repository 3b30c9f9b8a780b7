import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import type { WorkerSpawner } from "../../src/harness/options.js";
import { createManagementClient } from "../../src/management/index.js";
import { startWorker } from "../../src/worker/index.js";
import handler from "./fixtures/echo-handler.js";

const API_KEY = "mounted-key-12345";

const spawnInProcess: WorkerSpawner = async (env) => {
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const worker = await startWorker(handler, { env, logDestination: sink, takeTimeoutMs: 2_000 });
  return { close: () => worker.close() };
};

describe("the harness serves the management copy itself", () => {
  it("runs jobs of an endpoint created through /v2/serverless on the handler's workers", async () => {
    await using harness = await startHarness({
      apiKey: API_KEY,
      endpoints: [{ id: "local", spawn: spawnInProcess }],
      managementV1: true,
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const template = await mgmt.templates.create({ name: "echo", image: "me/echo:1", serverless: true });
    const endpoint = await mgmt.serverless.create({
      name: "ep",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      templateId: template.id,
      cpu: [{ id: "cpu3c", vcpuCount: 2 }],
      workers: { min: 0, max: 1 },
    });
    expect(harness.endpointIds()).toEqual(["local", endpoint.id]);
    expect(await mgmt.getTemplate(template.id, { includeEndpointBoundTemplates: true })).toMatchObject({
      imageName: "me/echo:1",
    });

    const answer = await fetch(`${harness.url}/v2/${endpoint.id}/runsync`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "mounted" } }),
    });
    expect(await answer.json()).toMatchObject({ status: "COMPLETED", output: { echo: "MOUNTED" } });
  });

  it("still answers job-API paths and 404s for unknown ones beside the management paths", async () => {
    await using harness = await startHarness({ apiKey: API_KEY });
    const health = await fetch(`${harness.url}/v2/local/health`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(health.status).toBe(200);
    const pods = await fetch(`${harness.url}/v2/pods`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(pods.status).toBe(501);
    expect(pods.headers.get("content-type")).toBe("application/problem+json");
    const unknown = await fetch(`${harness.url}/v3/nothing`);
    expect(unknown.status).toBe(404);
  });
});
