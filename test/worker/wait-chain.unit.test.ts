import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { defineHandler } from "../../src/index.js";
import { WaiterSet } from "../../src/wait.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Issue 21, item 1: the change notifier chained each wait's waker onto the last, never unlinked a
 * wait that timed out, and woke the chain recursively, so ~14 000 timed-out waits later a notify
 * threw RangeError (stack overflow) and the worker died with its jobs. The take loop adds one such
 * wait per second while every slot is busy: one job holding the only slot for ~4 hours.
 */

const WAITS = 20_000;

/** Lets every loop woken by a clock step run to its next wait. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe("waits that time out", () => {
  it("leave nothing in a WaiterSet, and a wake after 20 000 of them is one call", async () => {
    const clock = new ManualClock();
    const waiters = new WaiterSet(clock);
    const closing = new AbortController();
    for (let i = 0; i < WAITS; i++) {
      const ended = waiters.wait(1_000, closing.signal);
      clock.advance(1_000);
      expect(await ended).toBe("timeout");
    }
    expect(waiters.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    const pending = waiters.wait(1_000, closing.signal);
    waiters.wakeAll();
    expect(await pending).toBe("woken");
    const aborted = waiters.wait(1_000, closing.signal);
    closing.abort();
    expect(await aborted).toBe("aborted");
    expect(waiters.size).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  it("a worker whose only slot is held for 20 000 s still frees it and takes the next job", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const onRejection = (err: unknown): void => {
      errors.push(err);
    };
    process.on("unhandledRejection", onRejection);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const w = await workerFor(
      h,
      defineHandler({
        // Past the 20 000 s the slot is held, within the longest timer Node keeps (2^31−1 ms).
        executionTimeoutMs: 24 * 3_600_000,
        handler: async ({ input }) => {
          if ((input as { gated?: boolean }).gated === true) await gate;
          return "done";
        },
      }),
      { clock },
    );
    try {
      const held = h.enqueue("local", { input: { gated: true } });
      await waitFor("the gated job to run", () => h.job(held)?.status === "IN_PROGRESS");
      // The take loop re-checks its slots once a second of the worker's clock.
      for (let i = 0; i < WAITS; i++) {
        clock.advance(1_000);
        if (i % 100 === 0) await settle();
        else await Promise.resolve();
      }
      await settle();
      release();
      expect((await h.waitForJob(held, { timeoutMs: 10_000 })).status).toBe("COMPLETED");
      const next = h.enqueue("local", { input: {} });
      expect((await h.waitForJob(next, { timeoutMs: 10_000 })).status).toBe("COMPLETED");
      expect(errors).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
      await w.close();
    }
  });
});
