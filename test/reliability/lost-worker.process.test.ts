import { describe, expect, it } from "vitest";
import { type Harness, ManualClock, startHarness } from "../../src/harness/index.js";
import { startWorkerProcess, waitFor } from "./helpers.js";

/**
 * The lost-worker rule (docs/reliability.md, docs/harness.md): a worker holding a job that sends no
 * ping for `heartbeatTimeoutMs` has lapsed, whatever else it sends or holds open; the job goes back to the queue once (`/health` `retried` + 1);
 * if its worker lapses again the job fails with a reason. Nothing stays IN_PROGRESS.
 *
 * The heartbeat timeout runs on a ManualClock: a live worker can never lapse because this machine
 * stalled, and a killed one lapses when the test moves the clock, not after real seconds. Held
 * polls (job-take) stay real time, so the workers run as usual.
 */
const HEARTBEAT_TIMEOUT_MS = 4_000;
const SLEEPER = "test/reliability/fixtures/sleeper.ts";

/**
 * Lapses a killed worker: moves the clock by the heartbeat timeout, which fires the lapse at once
 * (only pings re-arm it, and the clock has not moved since the worker's last ping). It first waits
 * for the harness to end every request the dead process had open, so that nothing of it is still
 * in flight when the assertions about the requeued job run.
 */
async function lapse(h: Harness, clock: ManualClock, podId: string): Promise<void> {
  await waitFor(`the harness to end every request of ${podId}`, () =>
    h
      .requests({ endpointId: "local" })
      .filter((r) => r.path.split("/")[4] === podId)
      .every((r) => r.status !== "pending"),
  );
  clock.advance(HEARTBEAT_TIMEOUT_MS);
}

describe("reliability: worker process SIGKILLed mid-job", () => {
  it("injects SIGKILL into the worker running a job: the lapsed job is requeued once and completes on the next worker", async () => {
    const clock = new ManualClock();
    await using h = await startHarness({
      clock,
      takeTimeoutMs: 500,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    });
    const first = await startWorkerProcess(h, SLEEPER, { podId: "doomed-1" });
    try {
      // Two minutes on doomed-1, so it is surely still running when killed; 100 ms on healthy-2.
      const id = h.enqueue("local", { input: { ms: 120_000, msOnPod: { "healthy-2": 100 } } });
      await waitFor("the job to start on doomed-1", () => h.job(id)?.workerId === "doomed-1");
      await first.kill();
      expect(await first.exited).toBe("SIGKILL");
      expect(h.job(id)?.status).toBe("IN_PROGRESS");
      // After the heartbeat timeout the harness puts the job back, counted as a retry.
      await lapse(h, clock, "doomed-1");
      expect(h.job(id)?.status).toBe("IN_QUEUE");
      expect(h.health("local").jobs).toEqual({
        completed: 0,
        failed: 0,
        inProgress: 0,
        inQueue: 1,
        retried: 1,
      });

      const second = await startWorkerProcess(h, SLEEPER, { podId: "healthy-2" });
      try {
        const job = await h.waitForJob(id, { timeoutMs: 20_000 });
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual({ slept: 100 });
        expect(job.workerId).toBe("healthy-2");
        expect(job.duplicateResults).toBe(0);
        expect(h.health("local").jobs).toEqual({
          completed: 1,
          failed: 0,
          inProgress: 0,
          inQueue: 0,
          retried: 1,
        });
      } finally {
        await second.kill();
      }
    } finally {
      await first.kill();
    }
  }, 60_000);

  it("injects SIGKILL twice into the workers running the same job: the second lapse fails it with a reason", async () => {
    const clock = new ManualClock();
    await using h = await startHarness({
      clock,
      takeTimeoutMs: 500,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    });
    const id = h.enqueue("local", { input: { ms: 120_000 } });
    for (const podId of ["doomed-a", "doomed-b"]) {
      const worker = await startWorkerProcess(h, SLEEPER, { podId });
      try {
        await waitFor(`the job to start on ${podId}`, () => h.job(id)?.workerId === podId);
        await worker.kill();
        expect(await worker.exited).toBe("SIGKILL");
      } finally {
        await worker.kill();
      }
      expect(h.job(id)?.status).toBe("IN_PROGRESS");
      await lapse(h, clock, podId);
      expect(h.job(id)?.status).toBe(podId === "doomed-a" ? "IN_QUEUE" : "FAILED");
    }
    const job = h.job(id)!;
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe(
      `worker doomed-b stopped sending heartbeats (no ping for ${HEARTBEAT_TIMEOUT_MS} ms) while running this job, for the second time`,
    );
    expect(h.health("local").jobs).toEqual({
      completed: 0,
      failed: 1,
      inProgress: 0,
      inQueue: 0,
      retried: 1,
    });
    // Neither killed worker ever posted a result for it.
    expect(h.requests({ route: "job-done" })).toEqual([]);
  }, 60_000);
});
