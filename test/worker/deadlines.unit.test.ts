import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { RunletError } from "../../src/errors.js";
import { ManualClock } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { jobTimeoutMs } from "../../src/worker/job/job-clock.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

const spinFixture = fileURLToPath(new URL("../fixtures/thread-spin.ts", import.meta.url));

describe("deadlines and job-stop", () => {
  it("aborts an async handler's signal at its deadline and reports the timeout", async () => {
    await using h = memoryHarness();
    // The deadline runs on the worker's clock: a ten-minute timeout passes without a real wait.
    const clock = new ManualClock();
    let reason: unknown;
    let started = false;
    await using _w = await workerFor(
      h,
      defineHandler({
        executionTimeoutMs: 600_000,
        handler: ({ signal }) =>
          new Promise((_resolve, reject) => {
            started = true;
            signal.addEventListener("abort", () => {
              reason = signal.reason;
              reject(signal.reason);
            });
          }),
      }),
      { clock },
    );
    const id = h.enqueue("local", { input: {} });
    await waitFor("the handler to start", () => started);
    // The deadline is armed in the turn the handler starts in; let that turn end.
    await new Promise((resolve) => setImmediate(resolve));
    // The clock's timer is set from the handler's real start, a few ms before it was armed.
    clock.advance(590_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reason).toBeUndefined();
    clock.advance(10_000);
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe("job timed out after 600000 ms (executionTimeout)");
    expect((reason as RunletError).code).toBe("RUNLET_JOB_TIMEOUT");
  });

  it("reports an in-process handler that ignores its deadline and stops the worker (exit code 1)", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    let stop = false;
    let started = false;
    const w = await workerFor(
      h,
      defineHandler({
        executionTimeoutMs: 60_000,
        hardStopGraceMs: 5_000,
        handler: async () => {
          started = true;
          while (!stop) await new Promise((r) => setTimeout(r, 10));
          return "too late";
        },
      }),
      { clock },
    );
    try {
      const id = h.enqueue("local", { input: {} });
      await waitFor("the handler to start", () => started);
      await new Promise((resolve) => setImmediate(resolve));
      // The deadline fires and arms the hard stop, whose grace then passes on the clock too.
      clock.advance(60_000);
      clock.advance(5_000);
      const job = await h.waitForJob(id);
      expect(job.error).toBe("job timed out after 60000 ms (executionTimeout)");
      expect(await w.stopped).toEqual({ reason: "runaway", exitCode: 1 });
    } finally {
      stop = true;
      await w.close();
    }
    expect(h.job(h.requests({ route: "job-done" })[0]!.path.split("/").at(-1)!)!.duplicateResults).toBe(0);
  });

  it("stops a running job on job-stop: its signal fires and nothing is posted for it", async () => {
    await using h = memoryHarness();
    let reason: unknown;
    const sink = logSink();
    await using _w = await workerFor(
      h,
      defineHandler({
        handler: ({ signal, input }) =>
          input === "quick"
            ? "quick"
            : new Promise((resolve) => {
                signal.addEventListener("abort", () => {
                  reason = signal.reason;
                  resolve("after stop");
                });
              }),
      }),
      { sink },
    );
    const id = h.enqueue("local", { input: {} });
    await waitFor("the job to start", () => h.job(id)?.status === "IN_PROGRESS");
    h.stopJob(id);
    await waitFor("the handler to see the stop", () => reason !== undefined);
    expect((reason as RunletError).code).toBe("RUNLET_JOB_STOPPED");
    // The worker serves on; a later job completes, and the stopped one never got a post.
    const next = await h.waitForJob(h.enqueue("local", { input: "quick" }));
    expect(next.status).toBe("COMPLETED");
    expect(h.job(id)!.status).toBe("CANCELLED");
    expect(h.requests({ route: "job-done" }).filter((r) => r.path.endsWith(`/${id}`))).toEqual([]);
    expect(h.requests({ route: "job-stop" }).length).toBeGreaterThan(0);
  });

  it(
    "terminates an isolation thread stuck in a synchronous infinite loop, reports the timeout, and keeps the slot serving",
    async () => {
      await using h = memoryHarness();
      const { default: definition } = await import("../fixtures/thread-spin.js");
      await using _w = await workerFor(h, definition, { handlerModule: spinFixture });
      const spun = await h.waitForJob(h.enqueue("local", { input: { mode: "spin" } }), {
        timeoutMs: THREAD_START_MS,
      });
      expect(spun.status).toBe("FAILED");
      expect(spun.error).toBe("job timed out after 1500 ms (executionTimeout)");
      const streamed = await h.waitForJob(h.enqueue("local", { input: { mode: "stream" } }), {
        timeoutMs: THREAD_START_MS,
      });
      expect(streamed.error).toBeUndefined();
      expect(streamed.status).toBe("COMPLETED");
      expect(streamed.progress).toEqual([{ step: "started" }]);
      expect(streamed.stream.map((c) => [c.output, c.metrics?.["model"]])).toEqual([
        ["a", "tiny"],
        [{ b: 1 }, "tiny"],
      ]);
      const threw = await h.waitForJob(h.enqueue("local", { input: { mode: "throw" } }), {
        timeoutMs: THREAD_START_MS,
      });
      expect(JSON.parse(threw.error!)).toMatchObject({
        error_type: "RangeError",
        error_message: "thread says no",
      });
    },
    THREAD_TEST_MS,
  );

  it("takes a job's positive integer policy.executionTimeout over the handler's default", () => {
    expect(jobTimeoutMs({ id: "j", input: {}, policy: { executionTimeout: 7_000 } }, 600_000)).toBe(7_000);
    expect(jobTimeoutMs({ id: "j", input: {}, policy: { executionTimeout: "7000" } }, 600_000)).toBe(600_000);
    expect(jobTimeoutMs({ id: "j", input: {}, policy: { executionTimeout: -1 } }, 600_000)).toBe(600_000);
    expect(jobTimeoutMs({ id: "j", input: {} }, 1_234)).toBe(1_234);
  });
});
