import { describe, expect, it } from "vitest";
import handler, { nextConcurrency } from "../../examples/dynamic-concurrency/handler.js";
import { createHarness } from "../../src/testing/index.js";

describe("examples/dynamic-concurrency", () => {
  it("grows one slot at a time up to the ceiling", () => {
    expect([1, 2, 3, 4, 5].map(nextConcurrency)).toEqual([2, 3, 4, 4, 4]);
  });

  it("runs more jobs at once as runlet asks for the next concurrency, never more than the ceiling", async () => {
    await using h = await createHarness({ handler, takeTimeoutMs: 500 });
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await h.endpoint.run({ input: { workMs: 300 } })).id);
    const seen: number[] = [];
    for (const id of ids) {
      const job = await h.harness.waitForJob(id);
      expect(job.status).toBe("COMPLETED");
      seen.push((job.output as { concurrentAtStart: number }).concurrentAtStart);
    }
    expect(Math.max(...seen)).toBeGreaterThan(1);
    expect(Math.max(...seen)).toBeLessThanOrEqual(4);
    // A worker that runs several jobs takes them in batches: the job-take-batch route is used.
    expect(h.harness.requests({ route: "job-take-batch" }).length).toBeGreaterThan(0);
  });
});
