import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { testHarness, waitFor, workerFor } from "./helpers.js";

// An empty answer that comes back at once must not make the take or stop poll spin. Each test waits
// until the worker has sent a few requests (so a worker that never polls fails), then checks an
// upper bound that only the pauses guarantee: a slower machine sends fewer requests, never more.

/** Upper bound on takes within `elapsedMs` when the k-th instant empty answer is followed by a pause of at least min(1000, 100·2^k)/2 ms. */
function maxTakes(elapsedMs: number): number {
  let count = 1;
  let at = 0;
  for (let k = 0; ; k++) {
    at += Math.min(1_000, 100 * 2 ** k) / 2;
    if (at > elapsedMs) return count;
    count += 1;
  }
}

describe("pacing of the long polls", () => {
  it("pauses between takes when job-take answers 400 at once (fast-boot)", async () => {
    await using h = await testHarness();
    h.injectFault("job-take", { status: 400 }, 10_000);
    const t0 = Date.now();
    const w = await workerFor(h, defineHandler({ handler: () => "ok" }));
    try {
      const takes = await waitFor("four takes", () => {
        const n = h.requests({ route: "job-take" }).length;
        return n >= 4 && n;
      });
      expect(takes).toBeLessThanOrEqual(maxTakes(Date.now() - t0));
    } finally {
      await w.close();
    }
  });

  it("pauses between takes when job-take answers 204 at once", async () => {
    await using h = await testHarness();
    h.injectFault("job-take", { status: 204 }, 5_000);
    const t0 = Date.now();
    const w = await workerFor(h, defineHandler({ handler: () => "ok" }));
    try {
      const takes = await waitFor("four takes", () => {
        const n = h.requests({ route: "job-take" }).length;
        return n >= 4 && n;
      });
      expect(takes).toBeLessThanOrEqual(maxTakes(Date.now() - t0));
    } finally {
      await w.close();
    }
  });

  it("polls job-stop at most once a second while it answers 204 at once", async () => {
    await using h = await testHarness();
    h.injectFault("job-stop", { status: 204 }, 10_000);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const w = await workerFor(
      h,
      defineHandler({
        handler: async () => {
          await gate;
          return "ok";
        },
      }),
    );
    try {
      const t0 = Date.now();
      const id = h.enqueue("local", { input: 1 });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS");
      const stops = await waitFor("two job-stop polls", () => {
        const n = h.requests({ route: "job-stop" }).length;
        return n >= 2 && n;
      });
      const elapsed = Date.now() - t0;
      // Each cycle lasts at least 1 s from its send: at most one poll per started second.
      expect(stops).toBeLessThanOrEqual(Math.floor(elapsed / 1_000) + 1);
      release();
      await h.waitForJob(id, { timeoutMs: 5_000 });
    } finally {
      release();
      await w.close();
    }
  });
});
