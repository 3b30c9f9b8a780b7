import { describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

/** Issue 21, items 5 and 10: what a worker still sees and says while and after it shuts down. */
describe("shutting down", () => {
  it("sees a job-stop sent during the shutdown grace (fails on the old code: the job ran out the grace)", async () => {
    await using h = memoryHarness();
    let reason: unknown;
    let started = false;
    const w = await workerFor(
      h,
      defineHandler({
        handler: ({ signal }) =>
          new Promise((_resolve, reject) => {
            started = true;
            signal.addEventListener("abort", () => {
              reason = signal.reason;
              reject(signal.reason);
            });
          }),
      }),
      { shutdownGraceMs: 60_000 },
    );
    const id = h.enqueue("local", { input: {} });
    // The handler itself, not only the harness: a take whose answer is still on its way when
    // close() aborts it never reaches the worker.
    await waitFor("the handler to run", () => started);
    const closed = w.close();
    h.stopJob(id);
    await waitFor("the handler's signal to abort", () => reason !== undefined, 20_000);
    expect(isRunletError(reason) && reason.code).toBe("RUNLET_JOB_STOPPED");
    await closed;
    // Nothing was posted for the stopped job.
    expect(
      h.requests({ route: "job-done" }).filter((r) => r.query["id"] !== undefined || r.body !== ""),
    ).toEqual([]);
  }, 30_000);

  it("stops with exit code 1 after giving up on a result (fails on the old code: 0)", async () => {
    await using h = memoryHarness();
    h.injectFault("job-done", { status: 503 }, 10_000);
    const w = await workerFor(h, defineHandler({ handler: () => "lost" }), {
      shutdownGraceMs: 100,
      flushTimeoutMs: 300,
    });
    const id = h.enqueue("local", { input: {} });
    await waitFor("the result to be retried", () => h.requests({ route: "job-done" }).length >= 2);
    await w.close();
    expect(await w.stopped).toEqual({ reason: "closed", exitCode: 1 });
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
  });
});
