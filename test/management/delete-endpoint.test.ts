import { describe, expect, it } from "vitest";
import { startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { startWorker } from "../../src/worker/index.js";
import { quietSink, slowHandler } from "../support/slow-handler.js";

const API_KEY = "delete-key-12345";

/** Holds each job until its signal aborts (a job-stop) or `ms` pass. */
const slow = slowHandler().definition;

describe("deleting a serverless endpoint through the harness's management copy", () => {
  it("stops its workers, deletes its waiting and running jobs, and its job routes answer 404", async () => {
    const events: string[] = [];
    const spawn: WorkerSpawner = async (env) => {
      const sink = quietSink();
      const worker = await startWorker(slow, {
        env,
        logDestination: sink,
        takeTimeoutMs: 1_000,
        shutdownGraceMs: 1_000,
      });
      events.push(`start ${env["RUNPOD_POD_ID"]} with ${env["FROM_TEMPLATE"]},${env["OWN"]}`);
      return {
        close: async () => {
          await worker.close();
          events.push(`stop ${env["RUNPOD_POD_ID"]}`);
        },
        exited: worker.stopped,
      };
    };
    const webhookCalls: string[] = [];
    await using harness = await startHarness({
      apiKey: API_KEY,
      endpoints: [{ id: "local" }],
      managementSpawn: spawn,
      takeTimeoutMs: 1_000,
      extraRoutes: (req, res, url) => {
        if (url.pathname !== "/hook") return false;
        webhookCalls.push(String(req.method));
        res.writeHead(200).end();
        return true;
      },
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const template = await mgmt.templates.create({
      name: "slow",
      image: "me/slow:1",
      serverless: true,
      env: { FROM_TEMPLATE: "template", OWN: "template" },
    });
    const endpoint = await mgmt.serverless.create({
      name: "ep",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      templateId: template.id,
      cpu: [{ id: "cpu3c", vcpuCount: 2 }],
      workers: { min: 1, max: 1 },
      // Merged over the template's: the worker's container has both, the endpoint's winning.
      env: { OWN: "endpoint" },
    });
    await harness.workersStarted(endpoint.id);
    expect(events).toEqual([`start ${endpoint.id}-worker-1 with template,endpoint`]);

    const headers = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" };
    const run = async (ms: number) => {
      const res = await fetch(`${harness.url}/v2/${endpoint.id}/run`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: { ms }, webhook: `${harness.url}/hook` }),
      });
      return ((await res.json()) as { id: string }).id;
    };
    const running = await run(60_000);
    const waiting = await run(0);
    await expect.poll(() => harness.job(running)?.status, { timeout: 10_000 }).toBe("IN_PROGRESS");
    expect(harness.job(waiting)?.status).toBe("IN_QUEUE");

    await mgmt.serverless.delete(endpoint.id);
    await expect
      .poll(() => events, { timeout: 10_000 })
      .toEqual([`start ${endpoint.id}-worker-1 with template,endpoint`, `stop ${endpoint.id}-worker-1`]);
    expect(harness.endpointIds()).toEqual(["local"]);
    expect(harness.job(running)).toMatchObject({ status: "IN_PROGRESS", deleted: true });
    expect(harness.job(waiting)).toMatchObject({ status: "IN_QUEUE", deleted: true });
    for (const path of [`/status/${waiting}`, "/health", "/run"]) {
      const res = await fetch(`${harness.url}/v2/${endpoint.id}${path}`, {
        method: path === "/run" ? "POST" : "GET",
        headers,
        ...(path === "/run" ? { body: '{"input":{}}' } : {}),
      });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: `endpoint "${endpoint.id}" not found`, status: 404 });
    }
    // Deleted jobs are dropped, as a ttl drops them: no webhook.
    expect(webhookCalls).toEqual([]);
    expect(await mgmt.serverless.list()).toEqual([]);
    // The harness's own endpoint is untouched.
    expect(harness.health("local").jobs.inQueue).toBe(0);
  }, 30_000);

  it("removeEndpoint answers false for an endpoint it does not serve", async () => {
    await using harness = await startHarness({ apiKey: API_KEY });
    expect(await harness.removeEndpoint("nope")).toBe(false);
    expect(await harness.removeEndpoint("local")).toBe(true);
    expect(harness.endpointIds()).toEqual([]);
  });
});
