import { describe, expect, it } from "vitest";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness } from "../support/workers.js";

describe("the in-process watchdog", () => {
  it("posts a stuck streaming job's timeout as a stream's final (isStream=true) and ends the process", async () => {
    await using h = await testHarness();
    const c = startRunletChild(h, "test/fixtures/spin-stream-in-process.ts", { podId: "pod-spin-stream" });
    try {
      const id = h.enqueue("local", { input: {} });
      const exit = await c.exited;
      expect(exit.code === 0).toBe(false);
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toBe("job timed out after 300 ms (executionTimeout)");
      expect(job.stream.map((chunk) => chunk.output)).toEqual(["first"]);
      const finals = h.requests({ route: "job-done" }).filter((r) => !r.body.includes('"IN_PROGRESS"'));
      expect(finals.map((r) => r.query["isStream"])).toEqual(["true"]);
      expect(job.duplicateResults).toBe(0);
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);
});
