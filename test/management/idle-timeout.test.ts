import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { ManualClock, startHarness } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { recordingSpawner, slowHandler } from "../support/slow-handler.js";

/**
 * An endpoint created through the harness's management copy scales its idle workers down after
 * its `workers.idleTimeout` (seconds; the copy's default, 10, when the create leaves it out), and a
 * PATCH of it takes effect at once. Real parts: the harness, the management client over HTTP, and
 * runlet workers in this process started by the harness's spawner; the idle time runs on a
 * ManualClock the test advances.
 */

const API_KEY = "idle-timeout-mgmt-key-123";
const cpu = [{ id: "cpu3c", vcpuCount: 2 }];
const gated = slowHandler();

/** A spawner of in-process workers that notes each start and stop by pod id. */
function spawner() {
  return recordingSpawner(gated.definition);
}

async function setup() {
  const clock = new ManualClock();
  const { spawn, started, stopped } = spawner();
  const harness = await startHarness({
    apiKey: API_KEY,
    clock,
    endpoints: [],
    managementSpawn: spawn,
    takeTimeoutMs: 1_000,
    heartbeatTimeoutMs: 60 * 60_000,
  });
  const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: harness.url });
  return { clock, harness, mgmt, started, stopped };
}

describe("workers.idleTimeout of endpoints made through the management copy", () => {
  it("stops a queue endpoint's idle worker after workers.idleTimeout seconds, and follows a PATCH of it", async () => {
    const { clock, harness, mgmt, started, stopped } = await setup();
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "idle-q",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 1, idleTimeout: 5 },
    });
    const runOne = async () => {
      const id = harness.enqueue(endpoint.id, { input: { ms: 0 } });
      expect((await harness.waitForJob(id)).status).toBe("COMPLETED");
      await expect
        .poll(() => harness.workersOf(endpoint.id).map((w) => w.status), { timeout: 10_000 })
        .toEqual(["IDLE"]);
      await sleep(200);
    };
    await runOne();
    clock.advance(4_999);
    await sleep(300);
    expect(stopped).toEqual([]);
    clock.advance(1);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([started[0]]);

    // A longer idle timeout by PATCH applies to the next worker.
    const patched = await mgmt.serverless.update(endpoint.id, { workers: { idleTimeout: 20 } });
    expect(patched.workers?.["idleTimeout"]).toBe(20);
    await runOne();
    expect(started).toHaveLength(2);
    clock.advance(19_999);
    await sleep(300);
    expect(stopped).toHaveLength(1);
    clock.advance(1);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([started[0], started[1]]);
  }, 60_000);

  it("takes the copy's default of 10 s when the create leaves idleTimeout out", async () => {
    const { clock, harness, mgmt, started, stopped } = await setup();
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "idle-default",
      type: "QUEUE",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 1 },
    });
    expect(endpoint.workers?.["idleTimeout"]).toBe(10);
    const id = harness.enqueue(endpoint.id, { input: { ms: 0 } });
    expect((await harness.waitForJob(id)).status).toBe("COMPLETED");
    await sleep(300);
    clock.advance(9_999);
    await sleep(300);
    expect(stopped).toEqual([]);
    clock.advance(1);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([started[0]]);
  }, 60_000);

  it("stops a load-balancing endpoint's idle worker after its idleTimeout", async () => {
    const { clock, harness, mgmt, started, stopped } = await setup();
    await using _h = harness;
    const endpoint = await mgmt.serverless.create({
      name: "idle-lb",
      type: "LOAD_BALANCER",
      scaling: { type: "REQUEST_COUNT", requestCount: 1 },
      image: "me/slow:1",
      cpu,
      workers: { min: 0, max: 1, idleTimeout: 3 },
    });
    const res = await fetch(`${harness.url}/lb/${endpoint.id}/runsync`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { ms: 0 } }),
    });
    expect(res.status).toBe(200);
    await res.text();
    const balancer = harness.loadBalancer(endpoint.id);
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 10_000 }).toEqual([0]);
    clock.advance(2_999);
    await sleep(300);
    expect(stopped).toEqual([]);
    clock.advance(1);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([started[0]]);
    expect((await mgmt.serverless.workers(endpoint.id)).workers).toEqual([]);
  }, 60_000);
});
