// In the process lane: the soak counts the process's timers, listeners and heap day by day; what
// other files left in a shared fork would count too, so it runs in a process of its own.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { startHarness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { WaiterSet } from "../../src/wait.js";
import { startWorker } from "../../src/worker/index.js";
import { logSink } from "../support/workers.js";
import {
  countSignalListeners,
  heapAfterGc,
  liveTimers,
  recordStackDepth,
  stackDepth,
} from "./soak-probes.js";

/**
 * Issue 21: a worker that lives for weeks. One worker against the harness, both on one
 * ManualClock, through 10 simulated days of mixed traffic (the file's name is from when it ran 30;
 * what grows by the day shows between the third day and the tenth as well, and the bench's
 * real-time soak watches the slopes, `npm run bench`): each day an idle stretch, one job
 * holding every slot for two hours (the take loop re-checks its slots every second of it), and a
 * burst of short, streaming, failing and cancelled jobs. After every day the test reads what must
 * not grow with time; at the end the worker must still take a job. Real time goes only to the
 * requests (the harness holds an empty take 20 ms).
 */

const DAYS = 10;
/** The day whose readings the last day's are held to. */
const BASE_DAY = 2;
const HOUR = 3_600_000;
const SECOND = 1_000;

/** Lets the loops woken by a clock step run to their next wait. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits for `check`, moving the clock a second at a time meanwhile: a worker pausing between
 * empty takes waits on the clock.
 */
async function until(clock: ManualClock, what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 4_000; i++) {
    if (check()) return;
    clock.advance(SECOND);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`the soak timed out waiting for ${what}`);
}

type Kind = "short" | "stream" | "fail" | "cancel" | "hold";

describe("a worker through 10 simulated days", () => {
  it("keeps stack depth, listeners on live signals, timers and heap bounded, and still takes a job", async () => {
    const clock = new ManualClock();
    const listeners = countSignalListeners();
    const rejections: unknown[] = [];
    const onRejection = (err: unknown): void => {
      rejections.push(err);
    };
    process.on("unhandledRejection", onRejection);
    await using h = await startHarness({
      clock,
      takeTimeoutMs: 20,
      // Past the soak's ~11 simulated days, within the longest timer Node keeps (2^31−1 ms, ~24.8 days).
      heartbeatTimeoutMs: 20 * 24 * HOUR,
      endpoints: [{ id: "local", executionTimeoutMs: 20 * 24 * HOUR }],
    });
    const releases = new WaiterSet();
    let holding = false;
    const definition = defineHandler({
      concurrency: 2,
      executionTimeoutMs: 3 * HOUR,
      handler: async function* ({ input, signal }) {
        recordStackDepth();
        const { kind } = input as { kind: Kind };
        if (kind === "fail") throw new Error("soak failure");
        if (kind === "stream") {
          for (let i = 0; i < 3; i++) yield { token: i };
          return;
        }
        if (kind === "cancel") {
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          return;
        }
        if (kind === "hold") {
          holding = true;
          await releases.wait(undefined, signal);
          holding = false;
        }
        yield "done";
      },
    });
    const sink = logSink();
    const worker = await startWorker(definition, {
      env: { ...h.workerEnv("local", { pingIntervalMs: 1_000 }), RUNPOD_ENDPOINT_ID: "local" },
      clock,
      logDestination: sink.stream,
      shutdownGraceMs: 2_000,
      flushTimeoutMs: 2_000,
      retryBaseMs: 20,
      retryCapMs: 200,
    });
    const daily: Array<{ listeners: number; timers: number; clockTimers: number; heap: number }> = [];
    let unexpected = 0;
    try {
      for (let day = 0; day < DAYS; day++) {
        // Idle: 20 hours in 10-minute steps.
        for (let step = 0; step < 120; step++) {
          clock.advance(10 * 60 * SECOND);
          await settle();
        }
        // Two jobs hold both slots for two hours, in 5-second steps (the take loop waits 1 s at a
        // time while every slot is busy; the job-stop poll runs throughout).
        const held = [
          h.enqueue("local", { input: { kind: "hold" } }),
          h.enqueue("local", { input: { kind: "hold" } }),
        ];
        await until(
          clock,
          "both holds to run",
          () => held.every((id) => h.job(id)?.status === "IN_PROGRESS") && holding,
        );
        for (let step = 0; step < (2 * HOUR) / (5 * SECOND); step++) {
          clock.advance(5 * SECOND);
          if (step % 50 === 0) await settle();
          else await Promise.resolve();
        }
        releases.wakeAll();
        // A burst: short, streaming, failing and cancelled jobs.
        const kinds: Kind[] = ["short", "stream", "fail", "cancel", "short", "stream", "fail", "short"];
        const burst = kinds.map((kind) => ({ kind, id: h.enqueue("local", { input: { kind } }) }));
        const cancelled = burst.filter((j) => j.kind === "cancel");
        for (const { id } of cancelled) {
          await until(clock, "the cancel job to run", () => h.job(id)?.status === "IN_PROGRESS");
          h.stopJob(id);
        }
        const all = [...held.map((id) => ({ id, kind: "hold" as Kind })), ...burst];
        const terminal = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
        await until(clock, "the day's jobs to end", () =>
          all.every(({ id }) => terminal.has(h.job(id)?.status ?? "")),
        );
        for (const { id, kind } of all) {
          const expected = kind === "fail" ? "FAILED" : kind === "cancel" ? "CANCELLED" : "COMPLETED";
          if (h.job(id)?.status !== expected) unexpected += 1;
        }
        // Four more hours idle lets the harness's retention drop the day's records.
        clock.advance(4 * HOUR);
        await settle();
        if (day === 0 || day === BASE_DAY || day === DAYS - 1) {
          // The quietest of a few looks 30 ms apart (longer than a held take): a take or post in
          // flight at one look adds its own listeners and timers for a moment (under load a run
          // read one more than the bound so), while what grows by the day is in every look.
          const looks: Array<{ listeners: number; timers: number; clockTimers: number }> = [];
          for (let look = 0; look < 5; look++) {
            await new Promise((resolve) => setTimeout(resolve, 30));
            looks.push({
              listeners: listeners.live(),
              timers: liveTimers(),
              clockTimers: clock.pendingTimers,
            });
          }
          daily.push({
            listeners: Math.min(...looks.map((l) => l.listeners)),
            timers: Math.min(...looks.map((l) => l.timers)),
            clockTimers: Math.min(...looks.map((l) => l.clockTimers)),
            heap: heapAfterGc(),
          });
        }
      }
      const last = h.enqueue("local", { input: { kind: "short" } });
      await until(clock, "the last job", () => h.job(last)?.status === "COMPLETED");
    } finally {
      await worker.close();
      listeners.uninstall();
      process.off("unhandledRejection", onRejection);
    }
    expect(rejections).toEqual([]);
    expect(unexpected).toBe(0);
    // A job starts from the take loop's wake: a chain of old wakers would show here as depth.
    expect(stackDepth.max).toBeLessThan(200);
    const [, base, last] = daily as [unknown, (typeof daily)[0], (typeof daily)[0]];
    // What the last day holds is what the third did: nothing grows by the day.
    expect(last.listeners).toBeLessThanOrEqual(base.listeners + 2);
    expect(last.listeners).toBeLessThanOrEqual(10);
    expect(last.timers).toBeLessThanOrEqual(base.timers + 5);
    expect(last.clockTimers).toBeLessThanOrEqual(20);
    expect(last.heap - base.heap).toBeLessThan(16 * 1024 * 1024);
  }, 120_000);
});
