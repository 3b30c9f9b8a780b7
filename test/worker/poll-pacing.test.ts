import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { STOP_POLL_MIN_CYCLE_MS } from "../../src/worker/stop-poll.js";
import { EMPTY_PAUSE } from "../../src/worker/take-loop.js";
import { testHarness, waitFor, workerFor } from "./helpers.js";

// An empty answer that comes back at once must not make the take or stop poll spin. The worker's
// pauses run on a ManualClock: while the test holds the clock still, the worker can send nothing
// more, and advancing it by less than the shortest pause releases nothing. No real time is slept.

/** The k-th pause after an instant empty answer lasts at least half its bound (jitter). */
const shortestPauseMs = (k: number): number => Math.min(EMPTY_PAUSE.capMs, EMPTY_PAUSE.baseMs * 2 ** k) / 2;

async function pacesTakes(status: 400 | 204): Promise<void> {
  await using h = await testHarness();
  h.injectFault("job-take", { status }, 10_000);
  const clock = new ManualClock();
  await using _w = await workerFor(h, defineHandler({ handler: () => "ok" }), { clock });
  const takes = () => h.requests({ route: "job-take" }).length;
  for (let k = 0; k < 4; k++) {
    // The worker sent take k+1 and now waits on the clock: nothing more goes out until it moves.
    await waitFor(`take ${k + 1} and its pause`, () => takes() === k + 1 && clock.pendingTimers === 1);
    clock.advance(shortestPauseMs(k) - 1);
    expect(clock.pendingTimers).toBe(1);
    expect(takes()).toBe(k + 1);
    clock.advance(EMPTY_PAUSE.capMs);
  }
  await waitFor("take 5", () => takes() === 5);
}

describe("pacing of the long polls", () => {
  it("pauses between takes when job-take answers 400 at once (fast-boot)", async () => {
    await pacesTakes(400);
  });

  it("pauses between takes when job-take answers 204 at once", async () => {
    await pacesTakes(204);
  });

  it("polls job-stop at most once a second while it answers 204 at once", async () => {
    await using h = await testHarness();
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
      const id = h.enqueue("local", { input: 1 });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS");
      const stops = () => h.requests({ route: "job-stop" }).length;
      // The running job's deadline is one clock timer; the poll's pad is the other.
      for (let n = 1; n <= 3; n++) {
        await waitFor(`job-stop poll ${n} and its pad`, () => stops() === n && clock.pendingTimers === 2);
        // A cycle lasts at least 1 s of the worker's clock from its send.
        clock.advance(STOP_POLL_MIN_CYCLE_MS - 1);
        expect(clock.pendingTimers).toBe(2);
        expect(stops()).toBe(n);
        clock.advance(1);
      }
      await waitFor("job-stop poll 4", () => stops() === 4);
      release();
      await h.waitForJob(id, { timeoutMs: 5_000 });
    } finally {
      release();
      await w.close();
    }
  });
});
