import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { STOP_POLL_MIN_CYCLE_MS } from "../../src/worker/job/stop-poll.js";
import { EMPTY_PAUSE } from "../../src/worker/platform/backoff.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

// An empty answer that comes back at once must not make the take or stop poll spin. The worker's
// pauses run on a ManualClock that the test moves 50 ms per look: each test waits until the worker
// has sent a few requests (so a worker that never polls fails), then checks an upper bound that
// only the pauses guarantee, counted in clock time. However slowly this machine runs, the clock
// moves only when the test moves it, so no real time is slept and no real duration is measured.

const TICK_MS = 50;

/** Upper bound on takes within `elapsedMs` of clock when the k-th instant empty answer is followed by a pause of at least min(cap, base·2^k)/2. */
function maxTakes(elapsedMs: number): number {
  let count = 1;
  let at = 0;
  for (let k = 0; ; k++) {
    at += Math.min(EMPTY_PAUSE.capMs, EMPTY_PAUSE.baseMs * 2 ** k) / 2;
    if (at > elapsedMs) return count;
    count += 1;
  }
}

async function pacesTakes(status: 400 | 204): Promise<void> {
  await using h = memoryHarness();
  h.injectFault("job-take", { status }, 10_000);
  const clock = new ManualClock();
  const t0 = clock.now();
  await using _w = await workerFor(h, defineHandler({ handler: () => "ok" }), { clock });
  const takes = await waitFor("five takes", () => {
    clock.advance(TICK_MS);
    const n = h.requests({ route: "job-take" }).length;
    return n >= 5 && n;
  });
  expect(takes).toBeLessThanOrEqual(maxTakes(clock.now() - t0));
}

describe("pacing of the long polls", () => {
  it("pauses between takes when job-take answers 400 at once (fast-boot)", async () => {
    await pacesTakes(400);
  });

  it("pauses between takes when job-take answers 204 at once", async () => {
    await pacesTakes(204);
  });

  it("polls job-stop at most once a second while it answers 204 at once", async () => {
    await using h = memoryHarness();
    h.injectFault("job-stop", { status: 204 }, 10_000);
    const clock = new ManualClock();
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
      { clock },
    );
    try {
      const t0 = clock.now();
      const id = h.enqueue("local", { input: 1 });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS");
      const stops = await waitFor("three job-stop polls", () => {
        clock.advance(TICK_MS);
        const n = h.requests({ route: "job-stop" }).length;
        return n >= 3 && n;
      });
      // Each cycle lasts at least 1 s of clock from its send: at most one poll per started second.
      expect(stops).toBeLessThanOrEqual(Math.floor((clock.now() - t0) / STOP_POLL_MIN_CYCLE_MS) + 1);
      release();
      await h.waitForJob(id, { timeoutMs: 5_000 });
    } finally {
      release();
      await w.close();
    }
  });
});
