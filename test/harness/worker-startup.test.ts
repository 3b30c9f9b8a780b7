import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, processSpawner, startHarness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";
import { gate, turn, waitFor } from "../support/workers.js";

// docs/harness.md, "Workers starting": a worker in its start-up (fitness checks, setup) is shown
// as starting, never idle; a dead one is never counted.

const GATED = fileURLToPath(new URL("../fixtures/gated-start.ts", import.meta.url));
const UNFIT = fileURLToPath(new URL("../fixtures/unfit.ts", import.meta.url));

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-startup-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function health(h: Harness): Promise<Record<string, number>> {
  const res = await fetch(`${h.url}/v2/local/health`, { headers: { authorization: `Bearer ${h.apiKey}` } });
  return ((await res.json()) as { workers: Record<string, number> }).workers;
}

async function dashboardWorkers(h: Harness): Promise<Array<Record<string, unknown>>> {
  const res = await fetch(`${h.dashboardUrl}api/state`, { headers: { authorization: `Bearer ${h.apiKey}` } });
  return ((await res.json()) as { workers: Array<Record<string, unknown>> }).workers;
}

describe("a worker's start-up as the harness shows it", () => {
  it("shows a `runlet start` child in its start-up as starting (health, dashboard, worker list), then ready with its phases", async () => {
    const gateFile = join(tmp, "open-gate");
    await using h = await startHarness({
      takeTimeoutMs: 500,
      dashboard: true,
      endpoints: [
        {
          id: "local",
          spawn: processSpawner(GATED, { baseEnv: { ...process.env, RUNLET_TEST_GATE: gateFile } }),
          minWorkers: 1,
        },
      ],
    });
    // The child pings while its health check waits: connected, but not ready.
    await waitFor("the starting worker's first ping", () => h.requests({ route: "ping" }).length > 0, 60_000);
    await waitFor(
      "its fitness phase",
      () => h.workerStartup("local", "local-worker-1")?.phase === "fitness",
      30_000,
    );
    expect(await health(h)).toMatchObject({ idle: 0, ready: 0, running: 0, initializing: 1 });
    expect(await dashboardWorkers(h)).toEqual([
      expect.objectContaining({ id: "local-worker-1", state: "starting", phase: "fitness" }),
    ]);
    expect(h.workers("local")).toEqual([expect.objectContaining({ state: "starting", phase: "fitness" })]);
    expect(h.requests({ route: "job-take" })).toEqual([]);

    await writeFile(gateFile, "");
    await waitFor(
      "the worker to be ready",
      () => h.workerStartup("local", "local-worker-1")?.state === "ready",
      30_000,
    );
    expect(await health(h)).toMatchObject({ idle: 1, ready: 1, initializing: 0 });
    const [row] = await dashboardWorkers(h);
    expect(row).toMatchObject({ state: "connected" });
    expect(Object.keys(row!["phases"] as object)).toEqual(["runlet", "fitness", "total"]);
    const id = h.enqueue("local", { input: {} });
    expect((await h.waitForJob(id)).output).toEqual({ ok: true });
  }, 120_000);

  it("never counts a worker whose process exited (an unfit `runlet start` child)", async () => {
    await using h = await startHarness({
      takeTimeoutMs: 500,
      endpoints: [{ id: "local", spawn: processSpawner(UNFIT, { baseEnv: process.env }), minWorkers: 1 }],
    });
    await waitFor(
      "the unfit worker's unhealthy ping",
      () => h.requests({ route: "ping" }).some((r) => r.query["status"] === "unhealthy"),
      60_000,
    );
    await waitFor("its exit", () => h.workerStartup("local", "local-worker-1")?.state === "exited", 30_000);
    // Before, it counted as idle (and unhealthy) until its heartbeat lapsed, 45 s later.
    expect(await health(h)).toMatchObject({ idle: 0, ready: 0, running: 0, unhealthy: 0 });
    // The scaler replaces it, as the platform replaces a dead pod: that one is starting.
    expect(h.workers("local")).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: "local-worker-1", state: "exited" })]),
    );
    expect(h.workers("local").filter((w) => w.state === "connected")).toEqual([]);
  }, 120_000);
});

describe("createHarness and start-up", () => {
  it("resolves once its worker is ready, not before its start-up ends", async () => {
    const check = gate<boolean>();
    let checking = false;
    const handler = defineHandler({
      healthCheck: () => {
        checking = true;
        return check.promise;
      },
      handler: () => "ok",
    });
    let resolved = false;
    const creating = createHarness({ handler, dashboard: true }).then((h) => {
      resolved = true;
      return h;
    });
    await waitFor("the worker's health check", () => checking);
    // The worker's start-up has begun, so its spawner has returned; from there to createHarness
    // resolving, were it not waiting for readiness, is promise callbacks only, which all run
    // before the next turn of the event loop.
    await turn();
    expect(resolved).toBe(false);
    check.open(true);
    await using h = await creating;
    expect(await health(h.harness)).toMatchObject({ idle: 1, initializing: 0 });
    const [row] = h.harness.workers("local");
    expect(row).toMatchObject({ id: "local-worker-1", state: "connected" });
    expect(Object.keys(row!.phases ?? {})).toEqual(["runlet", "fitness", "total"]);
  });

  it("rejects, naming the worker, when it stops before it is ready", async () => {
    const handler = defineHandler({
      healthCheck: () => false,
      handler: () => "never",
    });
    await expect(createHarness({ handler })).rejects.toThrow(
      /^createHarness: worker local-worker-1 stopped before it was ready \(unhealthy, exit code 1\)/,
    );
  });
});
