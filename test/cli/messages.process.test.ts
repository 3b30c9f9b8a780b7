import { describe, expect, it } from "vitest";
import type { HandlerDefinition } from "../../src/handler/index.js";
import { defineHandler, JobError } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";
import { logSink, testHarness, waitFor, workerFor } from "../support/workers.js";

/** Issue 12, "Messages": exact texts of failures that users read. (CLI forms: usage, build, process and cli-harness tests.) */
describe("messages users read", () => {
  it("names createHarness, not startWorker, when its handler is not a defineHandler result", async () => {
    const plain = (() => ({ ok: true })) as unknown as HandlerDefinition;
    await expect(createHarness({ handler: plain })).rejects.toMatchObject({
      code: "RUNLET_HANDLER_INVALID",
      message:
        'createHarness: the handler of endpoint "local" must be a defineHandler(...) result, got a function; wrap it: defineHandler({ handler })',
    });
    const object = { handler: () => 1 } as unknown as HandlerDefinition;
    await expect(createHarness({ endpoints: [{ id: "e", handler: object }] })).rejects.toMatchObject({
      message:
        'createHarness: the handler of endpoint "e" must be a defineHandler(...) result, got an object; wrap it: defineHandler({ handler })',
    });
  });

  it("logs a failed job's Finished. line at warn and a completed one's at info", async () => {
    await using h = await testHarness();
    const sink = logSink();
    await using _w = await workerFor(
      h,
      defineHandler({
        handler: ({ input }) => {
          if ((input as { fail?: boolean }).fail === true) throw new JobError("no thanks");
          return "fine";
        },
      }),
      { sink },
    );
    const ok = h.enqueue("local", { input: {} });
    expect((await h.waitForJob(ok, { timeoutMs: 20_000 })).status).toBe("COMPLETED");
    const bad = h.enqueue("local", { input: { fail: true } });
    expect((await h.waitForJob(bad, { timeoutMs: 20_000 })).status).toBe("FAILED");
    const finished = () =>
      sink.lines
        .filter((l) => l["message"] === "Finished.")
        .map((l) => [l["requestId"], l["level"], l["code"] ?? null, l["error"] ?? null]);
    // The log line follows the post; wait for both.
    await waitFor("both Finished. lines", () => finished().length >= 2);
    expect(finished()).toEqual([
      [ok, "INFO", null, null],
      [bad, "WARN", "RUNLET_JOB_FAILED", "no thanks"],
    ]);
  });
});
