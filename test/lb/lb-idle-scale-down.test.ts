import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { ManualClock, startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { startWorker } from "../../src/worker/index.js";
import { quietSink, slowHandler } from "../support/slow-handler.js";

/**
 * A load-balancing endpoint's fleet scales idle workers down as the platform does
 * (`workers.idleTimeout`): a worker above `minWorkers` with no request in flight for
 * `idleTimeoutMs` leaves routing and stops. Real parts: the harness over HTTP and runlet workers in
 * load-balancing mode in this process, started by the fleet's spawner on loopback ports; the idle
 * time runs on a ManualClock the test advances (requests and health checks run in real time).
 */

const API_KEY = "lb-idle-scale-down-key-1";
const IDLE_MS = 10_000;
const headers = { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" };

const gated = slowHandler();

function spawner(): { spawn: WorkerSpawner; started: string[]; stopped: string[] } {
  const started: string[] = [];
  const stopped: string[] = [];
  const spawn: WorkerSpawner = async (env) => {
    const worker = await startWorker(gated.definition, {
      mode: "lb",
      env,
      logDestination: quietSink(),
      shutdownGraceMs: 1_000,
    });
    const pod = env["RUNPOD_POD_ID"] ?? "?";
    started.push(pod);
    return {
      close: async () => {
        await worker.close();
        stopped.push(pod);
      },
      exited: worker.stopped,
    };
  };
  return { spawn, started, stopped };
}

async function fleetHarness(fleet: { minWorkers: number; maxWorkers: number; idleTimeoutMs?: number }) {
  const clock = new ManualClock();
  const { spawn, started, stopped } = spawner();
  const harness = await startHarness({ apiKey: API_KEY, clock, endpoints: [] });
  harness.addLoadBalancer({ id: "lbidle", fleet: { spawn, ...fleet } });
  const balancer = harness.loadBalancer("lbidle");
  const call = (ms: number) =>
    fetch(`${harness.url}/lb/lbidle/runsync`, {
      method: "POST",
      headers,
      body: JSON.stringify({ input: { ms } }),
    }).then(async (res) => ({
      status: res.status,
      worker: res.headers.get("x-runpod-worker-id"),
      body: await res.text(),
    }));
  const ready = () => balancer.workers().filter((w) => w.health === "ready");
  return { clock, harness, balancer, call, ready, started, stopped };
}

describe("idle workers scale down (load-balancing fleet)", () => {
  it("scales up under load, never stops a busy worker, then goes back to minWorkers after idleTimeoutMs of no request", async () => {
    const { clock, harness, balancer, call, ready, started, stopped } = await fleetHarness({
      minWorkers: 1,
      maxWorkers: 2,
      idleTimeoutMs: IDLE_MS,
    });
    await using _h = harness;
    await expect.poll(() => ready().length, { timeout: 20_000 }).toBe(1);
    gated.closeGate();
    const held = [call(-1), call(-1)];
    // The second request finds no free worker and starts another.
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 20_000 }).toEqual([1, 1]);
    expect(started).toHaveLength(2);

    // Busy far past the timeout: neither is stopped.
    clock.advance(3 * IDLE_MS);
    await sleep(300);
    expect(stopped).toEqual([]);

    gated.release();
    for (const answer of await Promise.all(held)) expect(answer.status).toBe(200);
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 10_000 }).toEqual([0, 0]);
    // Idle a millisecond short of the timeout: both stay; at it, the newer goes and the minimum stays.
    clock.advance(IDLE_MS - 1);
    await sleep(300);
    expect(stopped).toEqual([]);
    clock.advance(1);
    expect(balancer.workers().map((w) => w.id)).toEqual([started[0]]);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([started[1]]);
    clock.advance(5 * IDLE_MS);
    await sleep(300);
    expect(stopped).toEqual([started[1]]);
    const answer = await call(0);
    expect(answer).toMatchObject({ status: 200, worker: started[0] });
  }, 60_000);

  it("keeps a worker with a request in flight while an idle one goes", async () => {
    const { clock, harness, balancer, call, ready, started, stopped } = await fleetHarness({
      minWorkers: 0,
      maxWorkers: 2,
      idleTimeoutMs: IDLE_MS,
    });
    await using _h = harness;
    gated.closeGate();
    const first = call(-1);
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 20_000 }).toEqual([1]);
    const second = call(-1);
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 20_000 }).toEqual([1, 1]);
    // One request ends: its worker is idle from now; the other stays busy.
    const [busy, idle] = [started[0]!, started[1]!];
    gated.release();
    await Promise.all([first, second]);
    gated.closeGate();
    const third = call(-1);
    await expect
      .poll(() => balancer.workers().filter((w) => w.inFlight > 0).length, { timeout: 10_000 })
      .toBe(1);
    const holder = balancer.workers().find((w) => w.inFlight > 0)!.id;
    const free = holder === busy ? idle : busy;
    clock.advance(IDLE_MS);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([free]);
    clock.advance(5 * IDLE_MS);
    await sleep(300);
    expect(stopped).toEqual([free]);
    expect(ready().map((w) => w.id)).toEqual([holder]);
    gated.release();
    expect(await third).toMatchObject({ status: 200, worker: holder });
    // Its request ended: now it goes too (minWorkers is 0).
    clock.advance(IDLE_MS);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([free, holder]);
  }, 60_000);

  it("serves a request that arrives as the last worker is retired on a worker started for it", async () => {
    const { clock, harness, balancer, call, ready, started, stopped } = await fleetHarness({
      minWorkers: 0,
      maxWorkers: 1,
      idleTimeoutMs: IDLE_MS,
    });
    await using _h = harness;
    expect(await call(0)).toMatchObject({ status: 200, worker: started[0] });
    await expect.poll(() => balancer.workers().map((w) => w.inFlight), { timeout: 10_000 }).toEqual([0]);
    // Retired within advance(): out of routing at once, still winding down when the request comes.
    clock.advance(IDLE_MS);
    expect(balancer.workers()).toEqual([]);
    const answer = await call(0);
    expect(answer.status).toBe(200);
    expect(started).toHaveLength(2);
    expect(answer.worker).toBe(started[1]);
    expect(stopped).toEqual([started[0]]);
    expect(ready().map((w) => w.id)).toEqual([started[1]]);
  }, 60_000);

  it("without idleTimeoutMs keeps its workers", async () => {
    const { clock, harness, call, started, stopped } = await fleetHarness({ minWorkers: 0, maxWorkers: 1 });
    await using _h = harness;
    expect((await call(0)).status).toBe(200);
    clock.advance(60 * 60_000);
    await sleep(300);
    expect(started).toHaveLength(1);
    expect(stopped).toEqual([]);
  }, 30_000);
});
