import { describe, expect, it } from "vitest";
import handler from "../../examples/cpu-thread/handler.js";
import { createHarness } from "../../src/testing/index.js";

const HANDLER_PATH = new URL("../../examples/cpu-thread/handler.ts", import.meta.url).pathname;

describe("examples/cpu-thread", () => {
  it("counts primes in a worker thread", async () => {
    await using h = await createHarness({ handler, handlerPath: HANDLER_PATH });
    const job = await h.endpoint.runsync({ input: { below: 100_000 } });
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ below: 100_000, primes: 9592 });
  });

  it("ends loops that ignore their deadline and refills the slots for the next job", async () => {
    await using h = await createHarness({ handler, handlerPath: HANDLER_PATH, takeTimeoutMs: 500 });
    // Two runaway jobs fill both slots (concurrency 2); each ignores its signal in a synchronous loop.
    const runaway = { input: { below: 50_000_000, ignoreSignal: true }, policy: { executionTimeout: 5_000 } };
    const a = await h.endpoint.run(runaway);
    const b = await h.endpoint.run(runaway);
    const c = await h.endpoint.run({ input: { below: 1_000 } });
    expect((await h.harness.waitForJob(a.id)).status).toBe("TIMED_OUT");
    expect((await h.harness.waitForJob(b.id)).status).toBe("TIMED_OUT");
    // Only a terminated thread frees a slot: the third job completes on a fresh thread.
    const third = await h.harness.waitForJob(c.id, { timeoutMs: 20_000 });
    expect(third.status).toBe("COMPLETED");
    expect(third.output).toEqual({ below: 1_000, primes: 168 });
  }, 40_000);
});
