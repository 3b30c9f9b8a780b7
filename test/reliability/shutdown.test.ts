import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { startWorkerProcess, waitFor } from "./helpers.js";

const GRACE_MS = 2_000;

describe("reliability: SIGTERM with jobs in flight", () => {
  it("injects SIGTERM with 20 jobs running and a 2 s grace: finished jobs are reported, the rest fail with 'worker shutting down', exit 0", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500 });
    const worker = await startWorkerProcess(h, "test/reliability/fixtures/sleeper.ts", {
      podId: "terminated",
      args: ["--shutdown-grace-ms", String(GRACE_MS)],
    });
    try {
      // Ten finish within the grace; ten would run for two minutes.
      const quick = Array.from({ length: 10 }, () => h.enqueue("local", { input: { ms: 1_500 } }));
      const slow = Array.from({ length: 10 }, () => h.enqueue("local", { input: { ms: 120_000 } }));
      await waitFor(
        "all 20 jobs to be running",
        () => [...quick, ...slow].every((id) => h.job(id)?.status === "IN_PROGRESS"),
        20_000,
      );
      const sentAt = Date.now();
      worker.child.kill("SIGTERM");
      const exit = await Promise.race([
        worker.exited,
        new Promise<string>((resolve) => setTimeout(() => resolve("still running"), GRACE_MS + 10_000)),
      ]);
      expect(exit, worker.output()).toBe(0);
      expect(Date.now() - sentAt).toBeLessThan(GRACE_MS + 10_000);
      // Every job was reported before the process exited: nothing is left IN_PROGRESS.
      for (const id of quick) {
        const job = h.job(id)!;
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual({ slept: 1_500 });
      }
      for (const id of slow) {
        const job = h.job(id)!;
        expect(job.status).toBe("FAILED");
        expect(job.error).toBe(
          `worker shutting down: the job did not finish within the ${GRACE_MS} ms shutdown grace`,
        );
      }
      expect(h.health("local").jobs).toEqual({
        completed: 10,
        failed: 10,
        inProgress: 0,
        inQueue: 0,
        retried: 0,
      });
      const done = h.requests({ route: "job-done" });
      expect(done).toHaveLength(20);
      expect(done.every((r) => r.status === 200)).toBe(true);
    } finally {
      await worker.kill();
    }
  }, 60_000);
});
