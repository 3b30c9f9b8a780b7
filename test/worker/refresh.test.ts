import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler, JobError } from "../../src/index.js";
import type { Worker } from "../../src/worker/index.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

// A result with stopPod means the platform replaces this worker: like the reference worker, runlet
// takes no job after it, lets the others finish, and stops (exit 0 for a requested refresh).

/** `promise`, or a rejection naming `what` after `ms`: a worker that never stops fails the test instead of hanging it. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Asserts that no job-take was sent after the job-done of `jobId`. */
function noTakeAfterDone(h: Harness, jobId: string): void {
  const done = h.requests({ route: "job-done" }).find((r) => r.path.includes(`/${jobId}`));
  expect(done).toBeDefined();
  const later = h
    .requests()
    .filter((r) => (r.route === "job-take" || r.route === "job-take-batch") && r.seq > done!.seq);
  expect(later).toEqual([]);
}

async function expectRefreshStop(h: Harness, w: Worker, first: string, second: string): Promise<void> {
  const info = await within(w.stopped, 8_000, "the worker to stop");
  expect(info).toEqual({ reason: "refresh", exitCode: 0 });
  expect(h.job(first)).toMatchObject({ stopPod: true });
  noTakeAfterDone(h, first);
  expect(h.job(second)!.status).toBe("IN_QUEUE");
}

describe("a result that asks for a new worker (stopPod)", () => {
  it("stops taking after a refreshWorker handler's job: the next queued job stays IN_QUEUE", async () => {
    await using h = memoryHarness();
    const w = await workerFor(h, defineHandler({ refreshWorker: true, handler: () => "done" }));
    try {
      const first = h.enqueue("local", { input: 1 });
      await waitFor("the first job to finish", () => h.job(first)?.status === "COMPLETED");
      const second = h.enqueue("local", { input: 2 });
      await expectRefreshStop(h, w, first, second);
      expect(h.job(first)!.output).toBe("done");
    } finally {
      await w.close();
    }
  });

  it("stops taking after a JobError({refreshWorker: true}), with two jobs queued up front", async () => {
    await using h = memoryHarness();
    const first = h.enqueue("local", { input: "boom" });
    const second = h.enqueue("local", { input: "fine" });
    const w = await workerFor(
      h,
      defineHandler({
        input: z.string(),
        concurrency: 1,
        handler: ({ input }) => {
          if (input === "boom") throw new JobError("GPU state is corrupt", { refreshWorker: true });
          return input;
        },
      }),
    );
    try {
      await expectRefreshStop(h, w, first, second);
      expect(h.job(first)).toMatchObject({ status: "FAILED", error: "GPU state is corrupt" });
    } finally {
      await w.close();
    }
  });

  it("lets another running job finish and report before it stops", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const w = await workerFor(
      h,
      defineHandler({
        input: z.string(),
        concurrency: 2,
        handler: async ({ input }) => {
          if (input === "refresh") throw new JobError("refresh me", { refreshWorker: true });
          await gate;
          return "slow done";
        },
      }),
      { sink },
    );
    try {
      const slow = h.enqueue("local", { input: "slow" });
      await waitFor("the slow job to run", () => h.job(slow)?.status === "IN_PROGRESS");
      const refresh = h.enqueue("local", { input: "refresh" });
      await waitFor("the refresh job to fail", () => h.job(refresh)?.status === "FAILED");
      const third = h.enqueue("local", { input: "third" });
      release();
      const info = await within(w.stopped, 8_000, "the worker to stop");
      expect(info).toEqual({ reason: "refresh", exitCode: 0 });
      expect(h.job(slow)).toMatchObject({ status: "COMPLETED", output: "slow done" });
      noTakeAfterDone(h, refresh);
      expect(h.job(third)!.status).toBe("IN_QUEUE");
    } finally {
      release();
      await w.close();
    }
  });

  it("runlet start exits 0 after a refreshWorker job, leaving the next job queued", async () => {
    await using h = await testHarness();
    const first = h.enqueue("local", { input: 1 });
    const second = h.enqueue("local", { input: 2 });
    const c = startRunletChild(h, "test/fixtures/refresh.ts", {
      podId: "pod-refresh",
      env: { RUNPOD_ENDPOINT_ID: "local" },
    });
    try {
      const exit = await within(c.exited, 15_000, "runlet start to exit");
      expect(exit, c.output()).toEqual({ code: 0, signal: null });
      expect(h.job(first)).toMatchObject({ status: "COMPLETED", output: "done", stopPod: true });
      noTakeAfterDone(h, first);
      expect(h.job(second)!.status).toBe("IN_QUEUE");
    } finally {
      await stopRunletChild(c);
    }
  });
});
