import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { eachLimited } from "../../src/cache/hydrate.js";

// The warm cache copies large files `parallelCopies` at a time through eachLimited (hydrate and
// sync). When one copy fails, the others must not go on past the call's end: a sync would release
// its lock while its other lanes still write to the volume, and a failed hydrate would go on
// copying with its time bound already cleared.

describe("eachLimited", () => {
  it("after one item fails, starts no other item and settles only once the running ones ended", async () => {
    const started: number[] = [];
    let running = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const items = Array.from({ length: 10 }, (_, i) => i);
    const failure = new Error("ENOSPC on the volume");
    const call = eachLimited(items, 2, new AbortController().signal, async (i) => {
      started.push(i);
      running += 1;
      try {
        if (i === 0) throw failure;
        if (i === 1) await gate;
      } finally {
        running -= 1;
      }
    });
    let runningWhenSettled: number | undefined;
    const outcome = call.then(
      () => "resolved",
      (err: unknown) => {
        runningWhenSettled = running;
        return err;
      },
    );
    await tick();
    release();
    expect(await outcome).toBe(failure);
    expect(runningWhenSettled).toBe(0);
    // A few more turns: a lane left running would start the next items now.
    for (let i = 0; i < 5; i++) await tick();
    expect(started).toEqual([0, 1]);
  });

  it("runs every item, at most `limit` at once, when none fails", async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await eachLimited([1, 2, 3, 4, 5, 6, 7], 3, new AbortController().signal, async (i) => {
      running += 1;
      most = Math.max(most, running);
      await tick();
      running -= 1;
      done.push(i);
    });
    expect(done.sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(most).toBe(3);
  });

  it("stops starting items once the signal aborts and rejects with its reason", async () => {
    const stop = new AbortController();
    const started: number[] = [];
    const reason = new Error("hydrateTimeoutMs");
    const call = eachLimited([1, 2, 3, 4], 1, stop.signal, async (i) => {
      started.push(i);
      if (i === 2) stop.abort(reason);
    });
    await expect(call).rejects.toBe(reason);
    expect(started).toEqual([1, 2]);
  });
});
