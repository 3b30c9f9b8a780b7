import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { RunletError } from "../../src/errors.js";
import { ManualClock, startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { recordingSpawner, slowHandler } from "../support/slow-handler.js";

/**
 * The harness scales idle workers down as the platform does (`workers.idleTimeout`): a worker it
 * started, above `minWorkers`, that has held no job (load balancing: had no request in flight) for
 * `idleTimeoutMs` is retired and stopped. Real parts: the harness over HTTP, runlet workers in this
 * process started by the harness's spawner; the idle time runs on a ManualClock the test advances
 * (job-takes and requests are held in real time, as always).
 */

const API_KEY = "idle-scale-down-key-123";
const IDLE_MS = 10_000;

const gated = slowHandler();

/** A spawner of in-process workers that notes each start and stop by pod id. */
function spawner() {
  return recordingSpawner(gated.definition);
}

/** A harness on a ManualClock whose heartbeats never lapse while the test moves the clock. */
async function harnessWith(
  clock: ManualClock,
  spawn: WorkerSpawner,
  endpoint: { minWorkers: number; maxWorkers: number; idleTimeoutMs?: number },
) {
  return startHarness({
    apiKey: API_KEY,
    clock,
    heartbeatTimeoutMs: 60 * 60_000,
    takeTimeoutMs: 1_000,
    endpoints: [{ id: "idle", spawn, ...endpoint }],
  });
}

describe("idle workers scale down (queue endpoints)", () => {
  it("scales up under load, then down to minWorkers once the extra workers have had no job for idleTimeoutMs", async () => {
    const clock = new ManualClock();
    const { spawn, started, stopped } = spawner();
    await using harness = await harnessWith(clock, spawn, {
      minWorkers: 1,
      maxWorkers: 3,
      idleTimeoutMs: IDLE_MS,
    });
    gated.closeGate();
    const jobs = [0, 1, 2].map(() => harness.enqueue("idle", { input: { ms: -1 } }));
    await expect
      .poll(() => jobs.map((id) => harness.job(id)?.status), { timeout: 15_000 })
      .toEqual(["IN_PROGRESS", "IN_PROGRESS", "IN_PROGRESS"]);
    expect([...started].sort()).toEqual(["idle-worker-1", "idle-worker-2", "idle-worker-3"]);

    // Busy past the timeout: nothing is stopped while they hold their jobs.
    clock.advance(3 * IDLE_MS);
    await sleep(200);
    expect(stopped).toEqual([]);

    gated.release();
    for (const id of jobs) expect((await harness.waitForJob(id)).status).toBe("COMPLETED");
    await expect
      .poll(() => harness.workersOf("idle").map((w) => w.status), { timeout: 10_000 })
      .toEqual(["IDLE", "IDLE", "IDLE"]);

    // Idle for a millisecond less than the timeout: all stay.
    clock.advance(IDLE_MS - 1);
    await sleep(300);
    expect(stopped).toEqual([]);
    // At the timeout the two above the minimum are stopped; the minimum stays for good.
    clock.advance(1);
    await expect.poll(() => stopped.length, { timeout: 10_000 }).toBe(2);
    expect(harness.workersOf("idle").map((w) => w.id)).toHaveLength(1);
    clock.advance(5 * IDLE_MS);
    await sleep(300);
    expect(stopped).toHaveLength(2);
    expect(started).toHaveLength(3);

    // Work still runs on the worker kept.
    expect((await harness.waitForJob(harness.enqueue("idle", { input: { ms: 0 } }))).status).toBe(
      "COMPLETED",
    );
    expect(started).toHaveLength(3);
  }, 60_000);

  it("never stops a busy worker; it goes once its job has ended and the timeout passed again", async () => {
    const clock = new ManualClock();
    const { spawn, started, stopped } = spawner();
    await using harness = await harnessWith(clock, spawn, {
      minWorkers: 0,
      maxWorkers: 2,
      idleTimeoutMs: IDLE_MS,
    });
    gated.closeGate();
    const long = harness.enqueue("idle", { input: { ms: -1 } });
    const short = harness.enqueue("idle", { input: { ms: 0 } });
    expect((await harness.waitForJob(short)).status).toBe("COMPLETED");
    await expect.poll(() => harness.job(long)?.status, { timeout: 15_000 }).toBe("IN_PROGRESS");
    await expect.poll(() => started.length, { timeout: 15_000 }).toBe(2);
    const busy = harness.job(long)!.workerId!;
    const other = started.find((id) => id !== busy)!;
    await expect
      .poll(() => harness.workersOf("idle").find((w) => w.id === other)?.status, { timeout: 10_000 })
      .toBe("IDLE");

    // Far past the timeout: the idle one goes, the busy one keeps its job.
    clock.advance(IDLE_MS);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([other]);
    clock.advance(5 * IDLE_MS);
    await sleep(300);
    expect(stopped).toEqual([other]);
    expect(harness.job(long)?.status).toBe("IN_PROGRESS");
    expect(harness.workersOf("idle").map((w) => [w.id, w.status])).toEqual([[busy, "RUNNING"]]);

    // Its job ends; its idle time starts then, not when it started.
    gated.release();
    expect((await harness.waitForJob(long)).status).toBe("COMPLETED");
    await expect
      .poll(() => harness.workersOf("idle").map((w) => w.status), { timeout: 10_000 })
      .toEqual(["IDLE"]);
    clock.advance(IDLE_MS - 1);
    await sleep(300);
    expect(stopped).toEqual([other]);
    clock.advance(1);
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual([other, busy]);
    expect(harness.health("idle").workers).toMatchObject({ idle: 0, running: 0, initializing: 0 });
  }, 60_000);

  it("hands a job that arrives as a worker is retired to another worker, started for it; none is lost", async () => {
    const clock = new ManualClock();
    const { spawn, started, stopped } = spawner();
    await using harness = await harnessWith(clock, spawn, {
      minWorkers: 0,
      maxWorkers: 1,
      idleTimeoutMs: IDLE_MS,
    });
    const first = harness.enqueue("idle", { input: { ms: 0 } });
    expect((await harness.waitForJob(first)).status).toBe("COMPLETED");
    expect(harness.job(first)?.workerId).toBe("idle-worker-1");
    await expect
      .poll(() => harness.workersOf("idle").map((w) => w.status), { timeout: 10_000 })
      .toEqual(["IDLE"]);

    // The timer retires worker 1 within advance(); the job arrives in the same turn, while the
    // worker still holds its job-take open and has not stopped. (The short real pause lets the
    // harness look at its queue after the job's end and arm the timer.)
    await sleep(200);
    clock.advance(IDLE_MS);
    const next = harness.enqueue("idle", { input: { ms: 0 } });
    expect(stopped).toEqual([]);
    const done = await harness.waitForJob(next);
    expect(done.status).toBe("COMPLETED");
    expect(done.workerId).toBe("idle-worker-2");
    await expect.poll(() => stopped, { timeout: 10_000 }).toEqual(["idle-worker-1"]);
    expect(started).toEqual(["idle-worker-1", "idle-worker-2"]);
  }, 60_000);

  it("without idleTimeoutMs keeps every worker it started, as before", async () => {
    const clock = new ManualClock();
    const { spawn, started, stopped } = spawner();
    await using harness = await harnessWith(clock, spawn, { minWorkers: 0, maxWorkers: 1 });
    expect((await harness.waitForJob(harness.enqueue("idle", { input: { ms: 0 } }))).status).toBe(
      "COMPLETED",
    );
    clock.advance(60 * 60_000 - 1);
    await sleep(300);
    expect(started).toEqual(["idle-worker-1"]);
    expect(stopped).toEqual([]);
  }, 30_000);

  it("refuses an idle timeout past its limits or without spawn, naming the field and the limit", async () => {
    const { spawn } = spawner();
    const refused = async (options: Parameters<typeof startHarness>[0], ...parts: string[]) => {
      const err = await startHarness(options).then(
        async (h) => {
          await h.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(RunletError);
      expect((err as RunletError).code).toBe("RUNLET_HARNESS_CONFIG");
      for (const part of parts) expect((err as RunletError).message).toContain(part);
    };
    await refused({ endpoints: [{ id: "q", spawn, idleTimeoutMs: 0 }] }, "endpoints[q].idleTimeoutMs", "≥ 1");
    await refused({ endpoints: [{ id: "q", spawn, idleTimeoutMs: 2 ** 31 }] }, "idleTimeoutMs", "2147483647");
    await refused({ endpoints: [{ id: "q", spawn, idleTimeoutMs: 1.5 }] }, "idleTimeoutMs", "integer");
    await refused({ endpoints: [{ id: "q", idleTimeoutMs: 1_000 }] }, "idleTimeoutMs", "spawn");

    await using harness = await startHarness({
      apiKey: API_KEY,
      endpoints: [{ id: "plain" }, { id: "spawned", spawn, maxWorkers: 1 }],
    });
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
    config(() => harness.updateEndpoint("spawned", { idleTimeoutMs: 0 }), "idleTimeoutMs", "≥ 1");
    config(() => harness.updateEndpoint("spawned", { idleTimeoutMs: -5 }), "idleTimeoutMs");
    config(() => harness.updateEndpoint("plain", { idleTimeoutMs: 1_000 }), "idleTimeoutMs", "spawn");
    config(
      () => harness.addEndpoint({ id: "late", spawn, idleTimeoutMs: 2 ** 31 }),
      "endpoints[late].idleTimeoutMs",
      "2147483647",
    );
    config(
      () => harness.addLoadBalancer({ id: "lb", fleet: { spawn, idleTimeoutMs: 0 } }),
      "fleet.idleTimeoutMs",
      "≥ 1",
    );
    // Accepted: a value, and null (no scale-down from now on).
    harness.updateEndpoint("spawned", { idleTimeoutMs: 5_000 });
    harness.updateEndpoint("spawned", { idleTimeoutMs: null });
  }, 30_000);
});
