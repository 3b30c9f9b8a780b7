import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { armHardStop, type HardStopTarget } from "../../src/worker/job/job-clock.js";
import { RunEnd } from "../../src/worker/runner/run.js";
import { turn } from "../support/workers.js";

/** The pieces every run shares: the one hard stop, and the one "do nothing once ended" guard. */

const log = pino({ level: "silent" });

function target(overrides: Partial<HardStopTarget>, clock: ManualClock, told: string[]): HardStopTarget {
  return {
    clock,
    graceMs: 500,
    log,
    message: "hard-stopping",
    fields: {},
    stillRuns: () => true,
    stop: async () => {
      told.push("stop");
      return true;
    },
    ranAway: () => told.push("ran away"),
    ...overrides,
  };
}

describe("armHardStop", () => {
  it("stops a handler still running once the grace on the clock is over, and nothing before", async () => {
    const clock = new ManualClock();
    const told: string[] = [];
    armHardStop(target({}, clock, told));
    clock.advance(499);
    await turn();
    expect(told).toEqual([]);
    clock.advance(1);
    await turn();
    expect(told).toEqual(["stop"]);
  });

  it("reports a runaway when its runner cannot stop it, and does nothing for a handler that ended", async () => {
    const clock = new ManualClock();
    const told: string[] = [];
    armHardStop(target({ stop: async () => false }, clock, told));
    armHardStop(target({ stillRuns: () => false, ranAway: () => told.push("wrong") }, clock, told));
    clock.advance(500);
    await turn();
    expect(told).toEqual(["ran away"]);
  });

  it("logs a stop that throws, without a runaway", async () => {
    const clock = new ManualClock();
    const told: string[] = [];
    armHardStop(
      target(
        {
          stop: () => {
            throw new Error("boom");
          },
        },
        clock,
        told,
      ),
    );
    clock.advance(500);
    await turn();
    expect(told).toEqual([]);
  });
});

describe("RunEnd", () => {
  it("makes a guarded action inert once the run ended", async () => {
    let settle!: () => void;
    const end = RunEnd.after(new Promise<void>((resolve) => (settle = resolve)));
    const calls: number[] = [];
    const act = end.guard((n: number) => calls.push(n));
    act(1);
    settle();
    await turn();
    expect(end.ended).toBe(true);
    act(2);
    expect(calls).toEqual([1]);
  });
});
