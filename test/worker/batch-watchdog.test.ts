import { afterEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler } from "../../src/index.js";
import { JobSlots } from "../../src/worker/platform/job-slots.js";
import { gate, testHarness, waitFor, workerFor } from "../support/workers.js";
import { numbers } from "./batch-helpers.js";

/**
 * The in-process watchdog (docs/worker.md) and batches: a job waiting for its batch's turn is not
 * holding the main thread, so it must not be watched until its batch launches — else the
 * heartbeat thread would post it as timed out and end the process while the thread was free.
 * The job table's watch (JobSlots.watch, behind each job's heartbeat slot) is spied on (and not passed through) so that nothing here can end the test
 * process: the watch times are the subject, not the kill, which test/worker/watchdog.test.ts
 * covers with a real child process.
 */
describe("batch jobs and the in-process watchdog", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("watches a queued batch job from its batch's launch, not from the take", async () => {
    const watched = new Map<string, number>();
    vi.spyOn(JobSlots.prototype, "watch").mockImplementation((jobId: string, atMs: number) => {
      watched.set(jobId, atMs);
    });
    vi.spyOn(JobSlots.prototype, "unwatch").mockImplementation((jobId: string) => {
      watched.delete(jobId);
    });
    await using h = await testHarness();
    const first = gate();
    const runs: number[][] = [];
    const a = h.enqueue("local", { input: { n: 1 } });
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        concurrency: 1,
        batch: { maxSize: 1, maxWaitMs: 0 },
        handler: async ({ inputs }) => {
          runs.push(inputs.map((i) => i.n));
          if (inputs[0]?.n === 1) await first.promise;
          return inputs;
        },
      }),
      { clock: new ManualClock(), exitOnHardStop: true },
    );
    await waitFor("the first batch to run", () => runs.length === 1);
    expect(watched.has(a)).toBe(true);
    // B is taken while A's batch holds the only batch slot: it waits, and is not watched.
    const b = h.enqueue("local", { input: { n: 2 }, policy: { executionTimeout: 5_000 } });
    await waitFor("the second job to be taken", () => h.job(b)?.status === "IN_PROGRESS");
    expect(watched.has(b)).toBe(false);
    // Its turn comes: from then on it is watched, for its own timeout counted from the launch.
    const launchedAfter = Date.now();
    first.open();
    await waitFor("the second batch to run", () => runs.length === 2);
    await Promise.all([h.waitForJob(a), h.waitForJob(b)]);
    expect(runs).toEqual([[1], [2]]);
    expect(h.job(b)?.status).toBe("COMPLETED");
    const calls = vi.mocked(JobSlots.prototype.watch).mock.calls.filter(([id]) => id === b);
    expect(calls.length).toBeGreaterThan(0);
    expect(Math.min(...calls.map(([, atMs]) => atMs))).toBeGreaterThanOrEqual(launchedAfter + 5_000);
    expect(watched.size).toBe(0);
  });
});
