import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler } from "../../src/index.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { logSink, memoryHarness, turn, waitFor, workerFor } from "../support/workers.js";
import { numbers } from "./batch-helpers.js";

/**
 * A batch that ignores its signal once no job of it is wanted: in an isolation thread it is
 * hard-stopped and the slot serves on; in-process the worker stops so the platform replaces it.
 * Deadlines and the grace run on a ManualClock.
 */

const batchThreadFixture = fileURLToPath(new URL("../fixtures/batch-thread.ts", import.meta.url));

describe("runaway batches", () => {
  it("stops the worker (runaway, exit code 1) when an in-process batch ignores its signal past the grace", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    let started = false;
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    const w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        executionTimeoutMs: 10_000,
        hardStopGraceMs: 1_000,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: () => {
          started = true;
          return new Promise<number[]>(() => undefined);
        },
      }),
      { clock },
    );
    await waitFor("the batch to start", () => started);
    await turn();
    clock.advance(10_000);
    for (const job of await Promise.all(ids.map((id) => h.waitForJob(id)))) {
      expect(job.error).toBe("job timed out after 10000 ms (executionTimeout)");
    }
    clock.advance(1_000);
    expect(await w.stopped).toEqual({ reason: "runaway", exitCode: 1 });
  });

  it(
    "fails each job of a runaway batch at its deadline, hard-stops the thread after the grace, and serves on",
    async () => {
      await using h = memoryHarness();
      const clock = new ManualClock();
      const sink = logSink();
      const { default: definition } = await import("../fixtures/batch-thread.js");
      const spun = [1, 2].map((n) => h.enqueue("local", { input: { mode: "spin", n } }));
      await using _w = await workerFor(h, definition, { clock, sink, handlerModule: batchThreadFixture });
      await waitFor(
        "both jobs to report progress from the spinning thread",
        () => spun.every((id) => h.job(id)?.progress.length === 1),
        THREAD_START_MS,
      );
      await turn();
      clock.advance(10_000);
      for (const job of await Promise.all(spun.map((id) => h.waitForJob(id)))) {
        expect(job.status).toBe("FAILED");
        expect(job.error).toBe("job timed out after 10000 ms (executionTimeout)");
      }
      clock.advance(1_000);
      await waitFor("the batch's hard stop", () =>
        sink.lines.some(
          (l) => l["message"] === "the batch handler ignored its aborted signal; hard-stopping the batch",
        ),
      );
      const next = [3, 4].map((n) => h.enqueue("local", { input: { mode: "echo", n } }));
      const done = await Promise.all(next.map((id) => h.waitForJob(id, { timeoutMs: THREAD_START_MS })));
      expect(done.map((j) => [j.status, j.output])).toEqual([
        ["COMPLETED", 3],
        ["COMPLETED", 4],
      ]);
      expect(spun.map((id) => h.job(id)!.duplicateResults)).toEqual([0, 0]);
    },
    THREAD_TEST_MS,
  );
});
