import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { KeyedWaiters } from "../../src/wait.js";

describe("KeyedWaiters", () => {
  it("wakes only the named key's waits, and reports how each wait ended", async () => {
    const clock = new ManualClock();
    const waits = new KeyedWaiters<string>(clock);
    const a1 = waits.wait("a", 1_000);
    const a2 = waits.wait("a", 1_000);
    const b = waits.wait("b", 1_000);
    expect([waits.size, waits.keys, waits.has("a"), waits.has("c")]).toEqual([3, 2, true, false]);
    expect(waits.wake("a")).toBe(true);
    expect(waits.wake("c")).toBe(false);
    expect(await Promise.all([a1, a2])).toEqual(["woken", "woken"]);
    expect([waits.size, waits.keys]).toEqual([1, 1]);
    clock.advance(1_000);
    expect(await b).toBe("timeout");
    const controller = new AbortController();
    const c = waits.wait("c", undefined, controller.signal);
    controller.abort();
    expect(await c).toBe("aborted");
    expect(await waits.wait("d", 10, AbortSignal.abort())).toBe("aborted");
    expect([waits.size, waits.keys, clock.pendingTimers]).toEqual([0, 0, 0]);
  });

  it("keeps nothing of 10 000 waits that timed out, were aborted or woken, over simulated days", async () => {
    const clock = new ManualClock();
    const waits = new KeyedWaiters<string>(clock);
    const controller = new AbortController();
    const ends: Promise<unknown>[] = [];
    for (let day = 0; day < 10; day++) {
      for (let i = 0; i < 1_000; i++) {
        const key = `job-${day}-${i % 50}`;
        // One shared signal for every wait: one listener on it, removed with the last wait.
        ends.push(waits.wait(key, 60_000 + i, i % 3 === 0 ? controller.signal : undefined));
      }
      for (let i = 0; i < 50; i += 2) waits.wake(`job-${day}-${i}`);
      clock.advance(24 * 3_600_000);
      expect([waits.size, waits.keys, clock.pendingTimers]).toEqual([0, 0, 0]);
    }
    const outcomes = await Promise.all(ends);
    expect(new Set(outcomes)).toEqual(new Set(["woken", "timeout"]));
    // An abort after the waits ended finds nothing left to end.
    controller.abort();
    expect(waits.size).toBe(0);
  });

  it("ends every wait on wakeAll", async () => {
    const waits = new KeyedWaiters<object>(new ManualClock());
    const k1 = {};
    const k2 = {};
    const all = [waits.wait(k1, 5), waits.wait(k2, undefined)];
    waits.wakeAll();
    expect(await Promise.all(all)).toEqual(["woken", "woken"]);
    expect(waits.size).toBe(0);
  });
});
