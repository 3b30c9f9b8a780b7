import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { startWorkerProcess, waitFor } from "./helpers.js";

/**
 * The lost-worker rule (docs/reliability.md): a worker holding a job that makes no request for
 * `heartbeatTimeoutMs` has lapsed; the job goes back to the queue once (`/health` `retried` + 1);
 * if its worker lapses again the job fails with a reason. Nothing stays IN_PROGRESS.
 */
const HEARTBEAT_TIMEOUT_MS = 4_000;
const SLEEPER = "test/reliability/fixtures/sleeper.ts";

describe("reliability: worker process SIGKILLed mid-job", () => {
  it("injects SIGKILL into the worker running a job: the lapsed job is requeued once and completes on the next worker", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500, heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
    const first = await startWorkerProcess(h, SLEEPER, { podId: "doomed-1" });
    try {
      const id = h.enqueue("local", { input: { ms: 1_500 } });
      await waitFor("the job to start on doomed-1", () => h.job(id)?.workerId === "doomed-1");
      await first.kill();
      expect(await first.exited).toBe("SIGKILL");
      // After the heartbeat timeout the harness puts the job back, counted as a retry.
      await waitFor(
        "the job to be requeued",
        () => h.job(id)?.status === "IN_QUEUE",
        HEARTBEAT_TIMEOUT_MS + 10_000,
      );
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
        expect(job.output).toEqual({ slept: 1_500 });
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
    await using h = await startHarness({ takeTimeoutMs: 500, heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
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
      await waitFor(
        `the harness to notice ${podId} lapsed`,
        () => h.job(id)?.status !== "IN_PROGRESS",
        HEARTBEAT_TIMEOUT_MS + 10_000,
      );
    }
    const job = h.job(id)!;
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe(
      `worker doomed-b stopped sending heartbeats (no request for ${HEARTBEAT_TIMEOUT_MS} ms) while running this job, for the second time`,
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
