import { describe, expect, it } from "vitest";
import { VERSION } from "../../src/version.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness, waitFor } from "../support/workers.js";

const REASON =
  "the handler failed to load in an isolation thread: Error: the model weights are missing (thread load)";

describe("a handler that fails to load inside an isolation thread (runlet start)", () => {
  it("pings unhealthy with the reason, fails the job it took, and exits 1 with one log line and no stack", async () => {
    await using h = await testHarness();
    // Queued before the worker starts: it is taken while the thread is still loading.
    const id = h.enqueue("local", { input: {} });
    const c = startRunletChild(h, "test/fixtures/thread-load-fails.ts", {
      podId: "pod-thread-load",
      env: { RUNPOD_ENDPOINT_ID: "local" },
    });
    try {
      const exit = await c.exited;
      const output = c.output();
      expect(exit, output).toEqual({ code: 1, signal: null });
      await waitFor("the job to be taken and failed", () => h.job(id)?.status === "FAILED");
      const job = h.job(id)!;
      expect(job.error).toBe(`${REASON}; this worker is unfit and stops`);
      const unhealthy = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
      // The take goes out while the thread loads: when the load fails first, the job arrives
      // after the unhealthy ping (and is failed then); when the job came first, the ping lists it
      // as running. Both orders happen on a loaded machine.
      const listed = unhealthy[0]?.query["job_id"];
      expect([undefined, id]).toContain(listed);
      expect(unhealthy.map((r) => r.query)).toEqual([
        {
          gpu: "LOCAL",
          ...(listed === undefined ? {} : { job_id: id }),
          status: "unhealthy",
          check: "handler-load",
          reason: REASON,
          runpod_version: `runlet/${VERSION}`,
        },
      ]);
      const errors = output.split("\n").filter((line) => line.includes('"level":"ERROR"'));
      expect(errors, output).toHaveLength(1);
      expect(errors[0]).toContain('"code":"RUNLET_WORKER_UNFIT"');
      expect(errors[0]).toContain(REASON);
      // No stack trace of runlet's internals (nor of the handler's load).
      expect(output).not.toMatch(/\n\s+at |thread-executor|node:internal/);
    } finally {
      await stopRunletChild(c);
    }
  }, 60_000);
});
