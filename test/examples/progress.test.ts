import { describe, expect, it } from "vitest";
import handler from "../../examples/progress/handler.js";
import { createHarness } from "../../src/testing/index.js";

describe("examples/progress", () => {
  it("posts every progress update, in order, before the final result", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { steps: 4, stepMs: 0 } });
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ steps: 4, done: true });
    expect(h.harness.job(job.id)?.progress).toEqual([
      { step: 1, of: 4, percent: 25 },
      { step: 2, of: 4, percent: 50 },
      { step: 3, of: 4, percent: 75 },
      { step: 4, of: 4, percent: 100 },
    ]);
    // On the wire: each update is an IN_PROGRESS job-done, and the final one (no status) comes last.
    const posts = h.harness
      .requests({ route: "job-done" })
      .map((r) => JSON.parse(r.body) as { status?: string });
    expect(posts.map((p) => p.status ?? "final")).toEqual([
      "IN_PROGRESS",
      "IN_PROGRESS",
      "IN_PROGRESS",
      "IN_PROGRESS",
      "final",
    ]);
  });
});
