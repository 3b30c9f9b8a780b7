import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { RunletError } from "../../src/errors.js";
import { type Harness, startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { startWorker } from "../../src/worker/index.js";
import { quietSink, recordingSpawner, slowHandler } from "../support/slow-handler.js";

/**
 * A `PATCH /v2/serverless/{id}` through the harness's management copy takes effect on the running
 * harness endpoint, as on the platform: `timeout` for the jobs made after it, `workers.min` /
 * `workers.max` on the scaler (queue) or the fleet (load balancing) at once, and a load-balancing
 * endpoint's `scaling.requestCount` for the workers started after it. Real parts: the harness,
 * the management client over HTTP, and runlet workers in this process started by the harness's
 * spawner.
 */

const API_KEY = "patch-endpoint-key-12345";
const headers = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" };

const gated = slowHandler();
const slow = gated.definition;
const closeGate = (): void => gated.closeGate();
const release = (): void => gated.release();

/** A spawner of in-process workers that notes each start and stop by pod id. */
function spawner() {
  return recordingSpawner(slow);
}

const cpu = [{ id: "cpu3c", vcpuCount: 2 }];

/** A harness whose management copy starts in-process workers, with its management client. */
async function managed(options: { takeTimeoutMs?: number } = {}) {
  const recorded = spawner();
  const harness = await startHarness({
    apiKey: API_KEY,
    endpoints: [],
    managementSpawn: recorded.spawn,
    ...options,
  });
  const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
  return { harness, mgmt, started: recorded.started, stopped: recorded.stopped };
}

/** Sends `/run` with `{ms}` to a queue endpoint of the harness; resolves to the job's id. */
function runner(harness: Harness, endpointId: string): (ms: number) => Promise<string> {
  return async (ms) => {
    const res = await fetch(`${harness.url}/v2/${endpointId}/run`, {
      method: "POST",
      headers,
      body: JSON.stringify({ input: { ms } }),
    });
    return ((await res.json()) as { id: string }).id;
  };
}

describe("PATCH /v2/serverless/{id} through the harness's management copy", () => {
  it("applies a new timeout to the jobs made after it; jobs queued or running before keep theirs", async () => {
    const { harness, mgmt } = await managed({ takeTimeoutMs: 1_000 });
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "timed",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      image: "me/slow:1",
      cpu,
      workers: { min: 1, max: 1 },
      timeout: 20_000,
    });
    await harness.workersStarted(endpoint.id);
    const run = runner(harness, endpoint.id);
    // One worker taking one job at a time: the first runs, the second waits in the queue.
    const running = await run(1_500);
    await expect.poll(() => harness.job(running)?.status, { timeout: 10_000 }).toBe("IN_PROGRESS");
    const queued = await run(1_000);
    expect(harness.job(queued)?.status).toBe("IN_QUEUE");

    const patched = await mgmt.serverless.update(endpoint.id, { timeout: 500 });
    expect(patched.timeout).toBe(500);
    const after = await run(10_000);

    // Made before the PATCH, each runs past 500 ms within its own 20 s.
    expect(await harness.waitForJob(running)).toMatchObject({ status: "COMPLETED" });
    expect(await harness.waitForJob(queued)).toMatchObject({ status: "COMPLETED" });
    // Made after it: timed out at 500 ms, not after its 10 s.
    const timedOut = await harness.waitForJob(after);
    expect(timedOut.status).toBe("TIMED_OUT");
    expect(timedOut.error).toContain("500 ms");
  }, 60_000);

  it("moves the scaler's bounds: a raised max starts more, a raised min starts at once, a lowered max stops idle workers and busy ones once done", async () => {
    const { harness, mgmt, started, stopped } = await managed({ takeTimeoutMs: 1_000 });
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "scaled",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 1 },
    });
    closeGate();
    const run = runner(harness, endpoint.id);
    const status = (id: string) => harness.job(id)?.status;
    const first = await run(-1);
    const second = await run(-1);
    await expect.poll(() => status(first), { timeout: 10_000 }).toBe("IN_PROGRESS");
    // workers.max is 1: the second job waits, and no second worker starts for it.
    await sleep(300);
    expect(started).toHaveLength(1);
    expect(status(second)).toBe("IN_QUEUE");

    // A raised max lets the waiting job start a second worker.
    await mgmt.serverless.update(endpoint.id, { workers: { max: 2 } });
    await expect.poll(() => status(second), { timeout: 10_000 }).toBe("IN_PROGRESS");
    expect(started).toHaveLength(2);

    // A raised min starts a worker at once, with no job waiting.
    await mgmt.serverless.update(endpoint.id, { workers: { min: 3, max: 3 } });
    await harness.workersStarted(endpoint.id);
    expect(started).toHaveLength(3);
    await expect
      .poll(
        () =>
          harness
            .workersOf(endpoint.id)
            .map((w) => w.status)
            .sort(),
        { timeout: 10_000 },
      )
      .toEqual(["IDLE", "RUNNING", "RUNNING"]);
    const idle = harness.workersOf(endpoint.id).find((w) => w.status === "IDLE")!.id;

    // A lowered max stops the idle worker at once and leaves the two busy ones running.
    await mgmt.serverless.update(endpoint.id, { workers: { min: 0, max: 1 } });
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([idle]);
    expect(harness.workersOf(endpoint.id).map((w) => w.status)).toEqual(["RUNNING", "RUNNING"]);
    expect((await mgmt.serverless.workers(endpoint.id)).workers).toHaveLength(2);
    expect([status(first), status(second)]).toEqual(["IN_PROGRESS", "IN_PROGRESS"]);

    // Their jobs end as they would; then one of them goes too, leaving the one max allows.
    release();
    expect((await harness.waitForJob(first)).status).toBe("COMPLETED");
    expect((await harness.waitForJob(second)).status).toBe("COMPLETED");
    await expect.poll(() => stopped.length, { timeout: 10_000 }).toBe(2);
    await expect.poll(() => harness.workersOf(endpoint.id).length, { timeout: 10_000 }).toBe(1);
    // A job sent now runs on the worker left; none starts above the new max.
    expect((await harness.waitForJob(await run(0))).status).toBe("COMPLETED");
    expect(started).toHaveLength(3);
  }, 60_000);

  it("gives a load-balancing endpoint's new workers the new requestCount, and moves its fleet's bounds", async () => {
    const { harness, mgmt, started, stopped } = await managed();
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "balanced",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 1 },
      image: "me/slow:1",
      cpu,
      workers: { min: 1, max: 1 },
    });
    const balancer = harness.loadBalancer(endpoint.id);
    const ready = (n: number) =>
      expect
        .poll(() => balancer.workers().filter((w) => w.health === "ready").length, { timeout: 20_000 })
        .toBe(n);
    await ready(1);
    const [older] = started;

    // The running worker keeps its concurrency; a worker started after the PATCH gets the new one.
    await mgmt.serverless.update(endpoint.id, { scaling: { type: "REQUEST_COUNT", requestCount: 3 } });
    expect(balancer.workers().map((w) => w.concurrency)).toEqual([1]);
    await mgmt.serverless.update(endpoint.id, { workers: { min: 2, max: 2 } });
    await ready(2);
    expect(started).toHaveLength(2);
    const newer = started[1]!;
    const concurrency = Object.fromEntries(balancer.workers().map((w) => [w.id, w.concurrency]));
    expect(concurrency).toEqual({ [older!]: 1, [newer]: 3 });

    // A request held on the newer worker (soft affinity); a lowered max stops the idle older one
    // and leaves the busy one serving.
    closeGate();
    const held = fetch(`${harness.url}/lb/${endpoint.id}/runsync`, {
      method: "POST",
      headers: { ...headers, "x-runpod-worker-id": newer },
      body: JSON.stringify({ input: { ms: -1 } }),
    });
    await expect
      .poll(() => balancer.workers().find((w) => w.id === newer)?.inFlight, { timeout: 10_000 })
      .toBe(1);
    await mgmt.serverless.update(endpoint.id, { workers: { min: 0, max: 1 } });
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([older]);
    expect(balancer.workers().map((w) => w.id)).toEqual([newer]);
    release();
    const answer = await held;
    expect(answer.status).toBe(200);
    expect(answer.headers.get("x-runpod-worker-id")).toBe(newer);
    expect((await mgmt.serverless.workers(endpoint.id)).workers.map((w) => w.id)).toEqual([newer]);
  }, 60_000);

  it("refuses values the harness cannot apply, through the API and on the Harness methods, changing nothing", async () => {
    const { spawn } = spawner();
    await using harness = await startHarness({
      apiKey: API_KEY,
      endpoints: [{ id: "plain" }],
      managementSpawn: spawn,
      loadBalancers: [{ id: "bare" }],
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
    const endpoint = await mgmt.serverless.create({
      name: "checked",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 2 },
      timeout: 60_000,
    });
    for (const timeout of [0, -5, 2_147_483_648]) {
      const refused = await mgmt.serverless.update(endpoint.id, { timeout }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(RunletError);
      expect((refused as RunletError).details).toMatchObject({ status: 400 });
      expect(JSON.stringify((refused as RunletError).details)).toContain("$.timeout: must be");
    }
    expect((await mgmt.serverless.get(endpoint.id)).timeout).toBe(60_000);

    const config = (fn: () => unknown, ...parts: string[]) => {
      let thrown: unknown;
      try {
        fn();
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(RunletError);
      expect((thrown as RunletError).code).toBe("RUNLET_HARNESS_CONFIG");
      for (const part of parts) expect((thrown as RunletError).message).toContain(part);
    };
    config(() => harness.updateEndpoint(endpoint.id, { executionTimeoutMs: 0 }), "executionTimeoutMs", "≥ 1");
    config(
      () => harness.updateEndpoint(endpoint.id, { executionTimeoutMs: 2 ** 31 }),
      "executionTimeoutMs",
      "2147483647",
    );
    config(() => harness.updateEndpoint(endpoint.id, { minWorkers: -1 }), "minWorkers", "≥ 0");
    config(() => harness.updateEndpoint(endpoint.id, { maxWorkers: 0 }), "maxWorkers", "≥ 1");
    config(() => harness.updateEndpoint(endpoint.id, { minWorkers: 1.5 }), "minWorkers", "integer");
    // The maximum is 2 now: a minimum of 3 alone is over it.
    config(() => harness.updateEndpoint(endpoint.id, { minWorkers: 3 }), "maxWorkers (2)", "minWorkers (3)");
    config(() => harness.updateEndpoint("plain", { maxWorkers: 2 }), "spawn");
    config(() => harness.updateEndpoint("nope", { executionTimeoutMs: 1_000 }), "nope");
    const lb = await mgmt.serverless.create({
      name: "checked-lb",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 1 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 2 },
    });
    config(() => harness.updateLoadBalancer(lb.id, { concurrency: 0 }), "concurrency", "≥ 1");
    config(() => harness.updateLoadBalancer(lb.id, { minWorkers: 3 }), "maxWorkers (2)", "minWorkers (3)");
    config(() => harness.updateLoadBalancer("bare", { concurrency: 2 }), "no fleet");
    config(() => harness.updateLoadBalancer("nope", { concurrency: 2 }), "nope");
    // A queue endpoint's timeout on one without spawn is fine.
    harness.updateEndpoint("plain", { executionTimeoutMs: 1_000 });
  }, 30_000);
});

describe("a worker trimmed by a lowered maximum while its spawner has not resolved", () => {
  it("is retired at once: a job queued after the trim is not handed to its held take", async () => {
    let spawnGate!: () => void;
    const spawnHeld = new Promise<void>((resolve) => {
      spawnGate = resolve;
    });
    const started: string[] = [];
    // The second worker's spawner resolves only when the test says so, though its worker is already
    // taking (the WorkerSpawner contract allows a spawner that resolves after the first take).
    const spawn: WorkerSpawner = async (env) => {
      const sink = quietSink();
      const worker = await startWorker(slow, {
        env,
        logDestination: sink,
        takeTimeoutMs: 1_000,
        shutdownGraceMs: 1_000,
      });
      started.push(env["RUNPOD_POD_ID"]!);
      if (started.length === 2) await spawnHeld;
      return { close: () => worker.close(), exited: worker.stopped };
    };
    closeGate();
    await using harness = await startHarness({
      apiKey: API_KEY,
      takeTimeoutMs: 1_000,
      endpoints: [{ id: "ep", spawn, minWorkers: 1, maxWorkers: 2 }],
    });
    await harness.workersStarted("ep");
    // The first worker is busy with a job held by the gate.
    const busy = harness.enqueue("ep", { input: { ms: -1 } });
    await expect.poll(() => harness.job(busy)?.status, { timeout: 10_000 }).toBe("IN_PROGRESS");
    // A second worker starts and holds a take while its spawner has not resolved.
    harness.updateEndpoint("ep", { minWorkers: 2 });
    await expect
      .poll(() => harness.requests({ route: "job-take" }).some((r) => r.path.includes("ep-worker-2")), {
        timeout: 10_000,
      })
      .toBe(true);
    // Lowered back: the second worker, which holds no job, is trimmed.
    harness.updateEndpoint("ep", { minWorkers: 1, maxWorkers: 1 });
    const next = harness.enqueue("ep", { input: { ms: 0 } });
    await sleep(300);
    // Not handed to the trimmed worker's held take: it waits for the busy worker.
    expect(harness.job(next)?.status).toBe("IN_QUEUE");
    release();
    spawnGate();
    expect((await harness.waitForJob(next, { timeoutMs: 10_000 })).status).toBe("COMPLETED");
    expect(harness.job(next)?.workerId).toBe("ep-worker-1");
  }, 30_000);
});
