import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { gate, logSink, testHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Issue 21, item 4: a heartbeat thread that dies was only logged; the worker went on taking jobs
 * it could no longer be seen holding, and the platform lapsed them and ran them twice.
 */
describe("a heartbeat thread that dies", () => {
  it("makes the worker stop taking, finish and report its job, and stop as unfit (fails on the old code: it keeps taking)", async () => {
    await using h = await testHarness();
    const sink = logSink();
    const hold = gate();
    const w = await workerFor(
      h,
      defineHandler({
        handler: async () => {
          await hold.promise;
          return "finished";
        },
      }),
      {
        sink,
        pingIntervalMs: 100,
        heartbeatEntry: new URL("../fixtures/heartbeat-dies.mjs", import.meta.url).href,
      },
    );
    try {
      const held = h.enqueue("local", { input: 1 });
      await waitFor("the job to run", () => h.job(held)?.status === "IN_PROGRESS");
      await waitFor("the worker to call itself unfit", () =>
        sink.lines.some((l) => l["code"] === "RUNLET_WORKER_UNFIT"),
      );
      const later = h.enqueue("local", { input: 2 });
      hold.open();
      expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
      expect((await h.waitForJob(held, { timeoutMs: 10_000 })).output).toBe("finished");
      expect(h.job(later)?.status).toBe("IN_QUEUE");
    } finally {
      hold.open();
      await w.close();
    }
  });
});
