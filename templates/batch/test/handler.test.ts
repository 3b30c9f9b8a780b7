import { startWorker } from "runlet";
import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";

// Each test runs the handler the way the platform does: a local copy of the platform, a worker
// taking jobs from it, and a client sending them over HTTP.
describe("batch handler", () => {
  it("scores a text", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { text: "hello" } });
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ text: "hello", score: 5 });
  });

  it("runs queued jobs as one batch, and fails a bad one alone", async () => {
    // No worker yet: the jobs queue first, so the worker's first take finds all of them.
    await using h = await createHarness({ endpoints: [{ id: "local", handler, workers: 0 }] });
    const ids = ["a", "   ", "abc"].map((text) => h.harness.enqueue("local", { input: { text } }));
    await using _worker = await startWorker(handler, { env: h.harness.workerEnv("local") });
    const jobs = await Promise.all(ids.map((id) => h.harness.waitForJob(id)));
    expect(jobs.map((j) => j.status)).toEqual(["COMPLETED", "FAILED", "COMPLETED"]);
    expect(jobs[1]?.error).toBe("text is only whitespace");
    // Each final result names its batch: all three ran in one call.
    const sizes = h.harness.requests({ route: "job-done" }).map((r) => r.query["batch_size"]);
    expect(sizes).toEqual(["3", "3", "3"]);
  });

  it("fails the job, naming the field, when the text is missing", async () => {
    await using h = await createHarness({ handler });
    // @ts-expect-error the endpoint is typed from the handler's schema; a missing text is the point here
    const job = await h.endpoint.runsync({ input: {} });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("text");
  });
});
