import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { type LifecycleOptions, WorkerLifecycle } from "../../src/worker/lifecycle/lifecycle.js";

/**
 * The worker's lifecycle on its own (lifecycle.ts): running → draining → flushing → closed, the
 * signals it owns, the facts it hears and the exits it decides, on a ManualClock. The process is
 * never ended: `exit` records the code.
 */

const log = pino({ level: "silent" });

function lifecycle(overrides: Partial<LifecycleOptions> = {}) {
  const clock = new ManualClock();
  const exits: number[] = [];
  const l = new WorkerLifecycle({
    log,
    clock,
    flushTimeoutMs: 2_000,
    exitOnHardStop: false,
    handleSignals: false,
    ping: undefined,
    exit: (code) => exits.push(code),
    ...overrides,
  });
  return { l, clock, exits };
}

describe("WorkerLifecycle", () => {
  it("goes running → draining → flushing → closed, each state aborting its own signals", async () => {
    const { l, clock, exits } = lifecycle();
    expect(l.state).toBe("running");
    expect([l.taking.aborted, l.polling.aborted, l.giveUp.aborted]).toEqual([false, false, false]);
    l.close();
    expect(l.state).toBe("draining");
    await l.draining;
    // Draining: nothing is taken, but reports still post and job-stop is still polled.
    expect([l.taking.aborted, l.polling.aborted, l.giveUp.aborted]).toEqual([true, false, false]);
    l.flushing();
    expect(l.state).toBe("flushing");
    clock.advance(1_999);
    expect(l.giveUp.aborted).toBe(false);
    clock.advance(1);
    // The flush deadline, on the clock: every report's retrying gives up.
    expect(l.giveUp.aborted).toBe(true);
    expect(l.polling.aborted).toBe(false);
    l.closed();
    expect(l.state).toBe("closed");
    expect(l.polling.aborted).toBe(true);
    expect(l.info).toEqual({ reason: "closed", exitCode: 0 });
    l.ended();
    expect(exits).toEqual([]);
  });

  it("clears the flush deadline when it closes before the deadline, and ignores a transition out of order", () => {
    const { l, clock } = lifecycle();
    l.close();
    l.flushing();
    expect(clock.pendingTimers).toBe(1);
    l.closed();
    expect(clock.pendingTimers).toBe(0);
    expect([l.taking.aborted, l.polling.aborted, l.giveUp.aborted]).toEqual([true, true, true]);
    // A transition out of order changes nothing.
    l.flushing();
    expect(l.state).toBe("closed");
  });

  it("stops taking before the unhealthy ping goes out, pings once, and ends with exit code 1", async () => {
    const pings: { check: string; takingAborted: boolean }[] = [];
    const { l } = lifecycle({
      ping: {
        unhealthy: async (check) => {
          pings.push({ check, takingAborted: l.taking.aborted });
        },
      },
    });
    l.unfit("gpu", "CUDA device lost");
    l.unfit("disk", "full");
    await l.unhealthyPing;
    expect(pings).toEqual([{ check: "gpu", takingAborted: true }]);
    expect(l.state).toBe("draining");
    expect(l.info).toEqual({ reason: "unhealthy", exitCode: 1 });
  });

  it("keeps the first reason: a refresh once draining, or once unfit, adds nothing", () => {
    const { l } = lifecycle();
    l.refresh("job-1");
    expect(l.info).toEqual({ reason: "refresh", exitCode: 0 });
    const other = lifecycle().l;
    other.close();
    other.refresh("job-2");
    expect(other.info).toEqual({ reason: "closed", exitCode: 0 });
  });

  it("makes a lost result's exit code 1, whatever the reason", () => {
    const { l } = lifecycle();
    l.refresh("job-1");
    l.lost("job-2");
    expect(l.info).toEqual({ reason: "refresh", exitCode: 1 });
  });

  it("ends the process after a runaway only with exitOnHardStop", () => {
    const owned = lifecycle({ exitOnHardStop: true });
    owned.l.runaway("job-1");
    owned.l.closed();
    expect(owned.exits).toEqual([]);
    owned.l.ended();
    expect(owned.exits).toEqual([1]);
    const library = lifecycle();
    library.l.runaway("job-1");
    library.l.closed();
    library.l.ended();
    expect(library.exits).toEqual([]);
    expect(library.l.info).toEqual({ reason: "runaway", exitCode: 1 });
  });

  it("ends the process after a signal's shutdown with its exit code, and at once on a second signal", () => {
    const listeners = process.listenerCount("SIGTERM");
    const { l, exits } = lifecycle({ handleSignals: true });
    expect(process.listenerCount("SIGTERM")).toBe(listeners + 1);
    try {
      process.emit("SIGTERM", "SIGTERM");
      expect(l.state).toBe("draining");
      expect(l.info).toEqual({ reason: "signal", exitCode: 0 });
      process.emit("SIGTERM", "SIGTERM");
      expect(exits).toEqual([1]);
    } finally {
      l.closed();
    }
    l.ended();
    expect(exits).toEqual([1, 0]);
    // closed() removed the handlers: a later signal reaches this lifecycle no more.
    expect(process.listenerCount("SIGTERM")).toBe(listeners);
  });
});
