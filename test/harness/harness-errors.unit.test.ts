import { describe, expect, it } from "vitest";
import { inMemoryHarness } from "../support/inject.js";

describe("Harness.stopJob and waitForJob", () => {
  it("throw coded errors for an unknown job and a wait that runs out", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 100 });
    expect(() => h.stopJob("nope")).toThrow(
      expect.objectContaining({ code: "RUNLET_HARNESS_NO_JOB", message: 'stopJob: no job "nope"' }),
    );
    await expect(h.waitForJob("nope", { timeoutMs: 10 })).rejects.toMatchObject({
      code: "RUNLET_HARNESS_NO_JOB",
    });
    const id = h.enqueue("local", { input: {} });
    await expect(h.waitForJob(id, { timeoutMs: 10 })).rejects.toMatchObject({
      code: "RUNLET_HARNESS_WAIT_TIMEOUT",
      details: { jobId: id, status: "IN_QUEUE", timeoutMs: 10 },
    });
    h.stopJob(id);
    expect((await h.waitForJob(id)).status).toBe("CANCELLED");
  });
});
