import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { type LifecycleOptions, WorkerLifecycle } from "../../src/worker/lifecycle/lifecycle.js";
import { signalsPart } from "../../src/worker/lifecycle/parts.js";

/**
 * The worker's lifecycle on its own (lifecycle.ts): running → draining → flushing → closed (moved
 * by the parts' stops: the jobs part's ends in flushing, the reports part's in closed), the
 * signals it owns, the facts it hears and the exits it decides, on a ManualClock; and the signals
 * part that hands it SIGTERM. The process is never ended: `exit` records the code.
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
    expect([l.taking.aborted, l.giveUp.aborted]).toEqual([false, false]);
    l.close();
    expect(l.state).toBe("draining");
    await l.draining;
    // Draining: nothing is taken, but reports still post.
    expect([l.taking.aborted, l.giveUp.aborted]).toEqual([true, false]);
    l.partStopped({ endsIn: "flushing" });
    expect(l.state).toBe("flushing");
    clock.advance(1_999);
    expect(l.giveUp.aborted).toBe(false);
    clock.advance(1);
    // The flush deadline, on the clock: every report's retrying gives up.
    expect(l.giveUp.aborted).toBe(true);
    l.partStopped({ endsIn: "closed" });
    expect(l.state).toBe("closed");
    expect(l.info).toEqual({ reason: "closed", exitCode: 0 });
    l.ended();
    expect(exits).toEqual([]);
  });

  it("clears the flush deadline when it closes before the deadline, and ignores a transition out of order", () => {
    // A part that ends no state moves nothing.
    const { l, clock } = lifecycle();
    l.close();
    l.partStopped({});
    expect(l.state).toBe("draining");
    l.partStopped({ endsIn: "flushing" });
    expect(clock.pendingTimers).toBe(1);
    l.partStopped({ endsIn: "closed" });
    expect(clock.pendingTimers).toBe(0);
    expect([l.taking.aborted, l.giveUp.aborted]).toEqual([true, true]);
    // A transition out of order changes nothing.
    l.partStopped({ endsIn: "flushing" });
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
    owned.l.partStopped({ endsIn: "closed" });
    expect(owned.exits).toEqual([]);
    owned.l.ended();
    expect(owned.exits).toEqual([1]);
    const library = lifecycle();
    library.l.runaway("job-1");
    // A start cut short before the reports part began: ended() closes the lifecycle itself.
    library.l.ended();
    expect(library.l.state).toBe("closed");
    expect(library.exits).toEqual([]);
    expect(library.l.info).toEqual({ reason: "runaway", exitCode: 1 });
  });

  it("ends the process after a signal's shutdown with its exit code, and at once on a second signal", async () => {
    const listeners = [process.listenerCount("SIGTERM"), process.listenerCount("unhandledRejection")];
    const { l, exits } = lifecycle({ handleSignals: true });
    // Building the lifecycle installs nothing: the signals part does, in its start.
    expect(process.listenerCount("SIGTERM")).toBe(listeners[0]);
    const part = signalsPart({ lifecycle: l, log });
    expect(await part.start(new AbortController().signal)).toBe(true);
    expect(process.listenerCount("SIGTERM")).toBe(listeners[0]! + 1);
    expect(process.listenerCount("unhandledRejection")).toBe(listeners[1]! + 1);
    try {
      process.emit("SIGTERM", "SIGTERM");
      expect(l.state).toBe("draining");
      expect(l.info).toEqual({ reason: "signal", exitCode: 0 });
      process.emit("SIGTERM", "SIGTERM");
      expect(exits).toEqual([1]);
    } finally {
      await part.stop(0);
    }
    l.ended();
    expect(exits).toEqual([1, 0]);
    // The part's stop removed the handlers: a later signal reaches this lifecycle no more.
    expect(process.listenerCount("SIGTERM")).toBe(listeners[0]);
    expect(process.listenerCount("unhandledRejection")).toBe(listeners[1]);
  });
});
