import { describe, expect, it } from "vitest";
import { startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { startWorker } from "../../src/worker/index.js";
import { quietSink, slowHandler } from "../support/slow-handler.js";

/**
 * An endpoint created through the harness's management copy with `type: LOAD_BALANCER` is a
 * load-balancing endpoint of the harness: its `requestUrls.base` is the `/lb/<id>` route, which
 * reaches real load-balancing workers (in this process, on loopback ports) the management
 * spawner starts from the environment the harness gives them; request-count scaling starts a
 * second worker when the first is full; `workers` answers from them; DELETE removes the route
 * and stops them.
 */

const API_KEY = "lb-endpoint-key-12345";

const gated = slowHandler();
const slow = gated.definition;

describe("a LOAD_BALANCER endpoint created through the management copy", () => {
  it("routes its /lb/<id> requests to load-balancing workers the spawner starts, scales on request count, lists them, and is removed by DELETE", async () => {
    const envs: Record<string, string>[] = [];
    const stopped: string[] = [];
    const spawn: WorkerSpawner = async (env) => {
      envs.push(env);
      const sink = quietSink();
      const worker = await startWorker(slow, {
        mode: env["RUNLET_MODE"] === "lb" ? "lb" : "queue",
        env,
        logDestination: sink,
        shutdownGraceMs: 1_000,
      });
      return {
        close: async () => {
          await worker.close();
          stopped.push(env["RUNPOD_POD_ID"] ?? "?");
        },
        exited: worker.stopped,
      };
    };
    await using harness = await startHarness({ apiKey: API_KEY, endpoints: [], managementSpawn: spawn });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const endpoint = await mgmt.serverless.create({
      name: "balanced",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 1 },
      image: "me/slow:1",
      cpu: [{ id: "cpu3c", vcpuCount: 2 }],
      workers: { min: 0, max: 2 },
      // The container's env reaches the workers; the platform's variables (PORT here) win over it.
      env: { GREETING: "hello", PORT: "80" },
    });
    const base = (endpoint.requestUrls as Record<string, string>)["base"];
    expect(base).toBe(`${harness.url}/lb/${endpoint.id}`);
    // workers.min is 0: nothing starts before a request comes.
    expect(envs).toEqual([]);

    const headers = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" };
    const run = (ms: number) =>
      fetch(`${base}/runsync`, { method: "POST", headers, body: JSON.stringify({ input: { ms } }) });
    gated.closeGate();
    const first = run(-1);
    // The first worker holds the first request (its concurrency, REQUEST_COUNT, is 1): a second
    // request waits and starts a second worker.
    await expect
      .poll(() => harness.workersOf(endpoint.id).some((w) => w.status === "RUNNING"), {
        timeout: 20_000,
      })
      .toBe(true);
    const second = await run(0);
    gated.release();
    const answers = [await first, second];
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const ids = answers.map((a) => a.headers.get("x-runpod-worker-id"));
    expect(new Set(ids).size).toBe(2);
    expect(envs).toHaveLength(2);
    for (const env of envs) {
      expect(env).toMatchObject({
        RUNLET_MODE: "lb",
        RUNLET_LB_HOST: "127.0.0.1",
        RUNPOD_ENDPOINT_ID: endpoint.id,
      });
      expect(Number(env["PORT"])).toBeGreaterThan(0);
      expect(env["PORT"]).not.toBe("80");
      expect(env["GREETING"]).toBe("hello");
    }
    expect(await answers[1]!.json()).toMatchObject({ status: "COMPLETED", output: { slept: 0 } });

    // workers: the two, idle now; the balancer's worker ids are the pod ids.
    const listed = await fetch(`${harness.url}/v2/serverless/${endpoint.id}/workers`, { headers });
    const body = (await listed.json()) as {
      workers: { id: string; status: string }[];
      summary: { total: number };
    };
    expect(body.workers.map((w) => w.id).sort()).toEqual([...ids].sort());
    expect(body.summary.total).toBe(2);
    await expect.poll(() => harness.workersOf(endpoint.id).map((w) => w.status)).toEqual(["IDLE", "IDLE"]);
    // No third worker: max is 2.
    await Promise.all([run(0), run(0), run(0)]);
    expect(envs).toHaveLength(2);

    await mgmt.serverless.delete(endpoint.id);
    // The route goes at once; the workers stop after (each within its grace).
    const gone = await run(0);
    expect(gone.status).toBe(404);
    expect(harness.workersOf(endpoint.id)).toEqual([]);
    await expect
      .poll(() => [...stopped].sort(), { timeout: 10_000 })
      .toEqual(envs.map((e) => e["RUNPOD_POD_ID"]).sort());
  }, 60_000);

  it("keeps workers.min running from the start, replaces one that ends on its own, and rolls out a new release", async () => {
    const workers: { pod: string; release: string | undefined; close: () => Promise<void> }[] = [];
    const spawn: WorkerSpawner = async (env) => {
      const sink = quietSink();
      const worker = await startWorker(slow, { mode: "lb", env, logDestination: sink, shutdownGraceMs: 500 });
      workers.push({ pod: env["RUNPOD_POD_ID"]!, release: env["RELEASE"], close: () => worker.close() });
      return { close: () => worker.close(), exited: worker.stopped };
    };
    await using harness = await startHarness({ apiKey: API_KEY, endpoints: [], managementSpawn: spawn });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const endpoint = await mgmt.serverless.create({
      name: "kept",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 2 },
      image: "me/slow:1",
      cpu: [{ id: "cpu3c", vcpuCount: 2 }],
      workers: { min: 1, max: 1 },
      env: { RELEASE: "1" },
    });
    await expect
      .poll(() => harness.workersOf(endpoint.id).map((w) => w.status), { timeout: 20_000 })
      .toEqual(["IDLE"]);
    const balancer = harness.loadBalancer(endpoint.id);
    // Each worker takes the endpoint's REQUEST_COUNT at once.
    expect(balancer.workers().map((w) => w.concurrency)).toEqual([2]);
    // The worker ends on its own: it leaves routing and another starts in its place.
    await workers[0]!.close();
    await expect.poll(() => workers.length, { timeout: 20_000 }).toBe(2);
    await expect
      .poll(() => harness.workersOf(endpoint.id).map((w) => w.id), { timeout: 20_000 })
      .toEqual([workers[1]!.pod]);
    const answer = await fetch(`${harness.url}/lb/${endpoint.id}/runsync`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ input: { ms: 0 } }),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("x-runpod-worker-id")).toBe(workers[1]!.pod);

    // A new image is a new release: the worker on the old one is replaced, and the rollout ends.
    await mgmt.serverless.update(endpoint.id, { image: "me/slow:2", env: { RELEASE: "2" } });
    await expect.poll(() => workers.length, { timeout: 20_000 }).toBe(3);
    // Each worker started with the env of the release it runs.
    expect(workers.map((w) => w.release)).toEqual(["1", "1", "2"]);
    await expect
      .poll(async () => (await mgmt.serverless.releases(endpoint.id)).rollout, { timeout: 20_000 })
      .toMatchObject({ inProgress: false, workersOnLatest: 1, workersTotal: 1 });
    expect((await mgmt.serverless.workers(endpoint.id)).workers.map((w) => w.id)).toEqual([workers[2]!.pod]);
  }, 60_000);

  it("does not restart a worker that cannot start at every look of a waiting request", async () => {
    const failing = defineHandler({
      setup: () => {
        throw new Error("no model here");
      },
      handler: () => ({}),
    });
    let spawned = 0;
    const spawn: WorkerSpawner = async (env) => {
      spawned++;
      const sink = quietSink();
      const worker = await startWorker(failing, { mode: "lb", env, logDestination: sink });
      return { close: () => worker.close(), exited: worker.stopped };
    };
    await using harness = await startHarness({ apiKey: API_KEY, endpoints: [], managementSpawn: spawn });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const endpoint = await mgmt.serverless.create({
      name: "broken",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 1 },
      image: "me/broken:1",
      cpu: [{ id: "cpu3c", vcpuCount: 2 }],
      workers: { min: 0, max: 1 },
    });
    // The request waits (up to the platform's 2 min) while workers fail: it gives up after 3 s.
    const started = Date.now();
    await expect(
      fetch(`${harness.url}/lb/${endpoint.id}/runsync`, {
        method: "POST",
        headers: { authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ input: {} }),
        signal: AbortSignal.timeout(3_000),
      }),
    ).rejects.toThrow();
    const seconds = (Date.now() - started) / 1_000;
    expect(spawned).toBeGreaterThanOrEqual(1);
    // At most one start a second (restartDelayMs), not one per health poll.
    expect(spawned).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
  }, 30_000);
});
