import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { startHarness } from "../../src/harness/index.js";
import { call, gate, post, startLbWorker } from "../support/lb-support.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * The harness's load-balancing endpoints (docs/load-balancing.md, "The harness and `runlet dev`"):
 * two real load-balancing workers behind the harness over loopback HTTP; routing, "no workers
 * available", the body limit, `X-Runpod-Worker-Id`, and the three affinity modes.
 */

/** A handler that answers with its worker's name, holding its one slot while `hold` is set. */
function named(name: string, holds: { gate: ReturnType<typeof gate> | undefined }) {
  return defineHandler({
    concurrency: 1,
    handler: async () => {
      await holds.gate?.promise;
      return { worker: name };
    },
  });
}

async function setUp() {
  const holds = { w1: { gate: undefined }, w2: { gate: undefined } } as Record<
    "w1" | "w2",
    { gate: ReturnType<typeof gate> | undefined }
  >;
  const w1 = await startLbWorker(named("w1", holds.w1));
  const w2 = await startLbWorker(named("w2", holds.w2));
  const harness = await startHarness({
    loadBalancers: [{ id: "lbe", waitMs: 400, strictWaitMs: 400, healthIntervalMs: 30, maxBodyBytes: 1_000 }],
    dashboard: true,
  });
  const balancer = harness.loadBalancer("lbe");
  balancer.addWorker({ id: "w1", url: w1.url });
  balancer.addWorker({ id: "w2", url: w2.url });
  await waitFor("both workers ready", () => balancer.workers().every((w) => w.health === "ready"));
  const url = `${harness.url}/lb/lbe`;
  const auth = { authorization: `Bearer ${harness.apiKey}` };
  const busy = (name: "w1" | "w2") => {
    const g = gate();
    holds[name].gate = g;
    return () => {
      holds[name].gate = undefined;
      g.open();
    };
  };
  return {
    url,
    auth,
    dashboardUrl: harness.dashboardUrl ?? "",
    apiKey: harness.apiKey,
    busy,
    balancer,
    [Symbol.asyncDispose]: async () => {
      await harness.close();
      await w1[Symbol.asyncDispose]();
      await w2[Symbol.asyncDispose]();
    },
  };
}

describe("a load-balancing endpoint of the harness", () => {
  it("routes to a worker, names it, refuses a missing key and a body over the limit", async () => {
    await using lb = await setUp();
    const answer = await post(`${lb.url}/runsync`, { input: {} }, lb.auth);
    expect(answer.status).toBe(200);
    const worker = answer.headers["x-runpod-worker-id"];
    expect(["w1", "w2"]).toContain(worker);
    expect(JSON.parse(answer.text).output).toEqual({ worker });
    expect((await post(`${lb.url}/runsync`, { input: {} })).status).toBe(401);
    const big = await post(`${lb.url}/runsync`, { input: "x".repeat(2_000) }, lb.auth);
    expect(big.status).toBe(413);
    await waitFor("the requests listed", () => lb.balancer.requests().length >= 2);
    expect(lb.balancer.requests()[0]).toMatchObject({ path: "/runsync", status: 200, affinity: "none" });
    // The dashboard's data route lists the workers and requests.
    const page = await call(`${lb.dashboardUrl}api/load-balancers`, {
      headers: { authorization: `Bearer ${lb.apiKey}` },
    });
    expect(page.status).toBe(200);
    const [listed] = JSON.parse(page.text).loadBalancers;
    expect(listed.id).toBe("lbe");
    expect(listed.workers.map((w: { id: string }) => w.id).sort()).toEqual(["w1", "w2"]);
    expect(listed.requests.some((r: { status: number }) => r.status === 413)).toBe(true);
  });

  it("answers no workers available after its wait when every slot is busy", async () => {
    await using lb = await setUp();
    const free1 = lb.busy("w1");
    const free2 = lb.busy("w2");
    const held = [
      post(`${lb.url}/run`, { input: {} }, lb.auth),
      post(`${lb.url}/run`, { input: {} }, lb.auth),
    ];
    await waitFor("both slots taken", () => lb.balancer.workers().every((w) => w.inFlight === 1));
    const refused = await post(`${lb.url}/run`, { input: {} }, lb.auth);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.text).error).toBe("no workers available");
    free1();
    free2();
    expect((await Promise.all(held)).map((a) => a.status)).toEqual([200, 200]);
  });

  it("soft affinity prefers the named worker and falls back when it is busy", async () => {
    await using lb = await setUp();
    for (let i = 0; i < 3; i += 1) {
      const a = await post(`${lb.url}/run`, { input: {} }, { ...lb.auth, "x-runpod-worker-id": "w2" });
      expect(a.headers["x-runpod-worker-id"]).toBe("w2");
    }
    const free = lb.busy("w2");
    const held = post(`${lb.url}/run`, { input: {} }, { ...lb.auth, "x-runpod-worker-id": "w2" });
    await waitFor("w2 busy", () => lb.balancer.workers().find((w) => w.id === "w2")?.inFlight === 1);
    const fallback = await post(`${lb.url}/run`, { input: {} }, { ...lb.auth, "x-runpod-worker-id": "w2" });
    expect(fallback.status).toBe(200);
    expect(fallback.headers["x-runpod-worker-id"]).toBe("w1");
    free();
    expect((await held).headers["x-runpod-worker-id"]).toBe("w2");
  });

  it("strict affinity waits for its worker, then answers 400 worker_timeout", async () => {
    await using lb = await setUp();
    const free = lb.busy("w2");
    const held = post(`${lb.url}/run`, { input: {} }, { ...lb.auth, "x-runpod-worker-id": "strict w2" });
    await waitFor("w2 busy", () => lb.balancer.workers().find((w) => w.id === "w2")?.inFlight === 1);
    const timedOut = await post(
      `${lb.url}/run`,
      { input: {} },
      { ...lb.auth, "x-runpod-worker-id": "strict w2" },
    );
    expect(timedOut.status).toBe(400);
    expect(JSON.parse(timedOut.text).error).toBe("worker_timeout");
    // Freed within the wait: the strict request is served by w2, never by w1.
    const waiting = post(
      `${lb.url}/run`,
      { input: {} },
      { ...lb.auth, "x-runpod-worker-id": "strict-resume w2" },
    );
    setTimeout(free, 100);
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(served.headers["x-runpod-worker-id"]).toBe("w2");
    expect((await held).status).toBe(200);
  });

  it("answers 404 affinity_worker_gone for a strict request naming a worker that is not there", async () => {
    await using lb = await setUp();
    const unknown = await post(
      `${lb.url}/run`,
      { input: {} },
      { ...lb.auth, "x-runpod-worker-id": "strict w9" },
    );
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).error).toBe("affinity_worker_gone");
    lb.balancer.removeWorker("w1");
    const gone = await post(
      `${lb.url}/run`,
      { input: {} },
      { ...lb.auth, "x-runpod-worker-id": "strict w1" },
    );
    expect(gone.status).toBe(404);
    // Soft affinity to a gone worker falls back.
    const soft = await post(`${lb.url}/run`, { input: {} }, { ...lb.auth, "x-runpod-worker-id": "w1" });
    expect(soft.headers["x-runpod-worker-id"]).toBe("w2");
    await waitForAsync(
      "health to still answer",
      async () => (await call(`${lb.url}/ping`, { headers: lb.auth })).status === 200,
    );
  });
});
