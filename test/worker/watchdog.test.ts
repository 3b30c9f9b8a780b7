import { describe, expect, it } from "vitest";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness } from "../support/workers.js";

/** The in-process watchdog on the heartbeat thread (issue 21, items 3 and 6). */
describe("the in-process watchdog", () => {
  it("is armed before the handler can run, whatever the input validator awaits (fails on the old code: the process never ends)", async () => {
    await using h = await testHarness();
    const c = startRunletChild(h, "test/fixtures/spin-sync-validator.ts", { podId: "pod-sync-validator" });
    try {
      const id = h.enqueue("local", { input: {} });
      // The old code armed it after the handler had started; this handler never yields, so the
      // watch was never set and the process ran for ever (this test then fails on its timeout).
      expect(await c.exited).toEqual({ code: null, signal: "SIGKILL" });
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toBe("job timed out after 300 ms (executionTimeout)");
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);

  it("reports every job it ends, not only the first one due (fails on the old code: the blocking job had no report)", async () => {
    await using h = await testHarness();
    // Both queued before the worker starts, so its first take (room for 2) hands out both and
    // they launch together: enqueued after the start, a loaded machine could hand the second out
    // on a later take, past the first one's kill, where "the worker ended" is the right report.
    const waiting = h.enqueue("local", { input: { kind: "wait" } });
    const spinning = h.enqueue("local", { input: { kind: "spin" } });
    const c = startRunletChild(h, "test/fixtures/block-after-other.ts", { podId: "pod-two-jobs" });
    try {
      expect(await c.exited).toEqual({ code: null, signal: "SIGKILL" });
      const jobs = await Promise.all(
        [waiting, spinning].map((id) => h.waitForJob(id, { timeoutMs: 10_000 })),
      );
      // Both ran past their deadlines while the main thread was held: both are reported.
      expect(jobs.map((j) => [j.status, j.error])).toEqual([
        ["FAILED", "job timed out after 300 ms (executionTimeout)"],
        ["FAILED", "job timed out after 300 ms (executionTimeout)"],
      ]);
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);
});
