import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { api, postChunk, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness } from "../support/inject.js";
import { waitForAsync } from "../support/wait-for.js";

// The /stream route in memory (test/support/inject.ts); its gathering is timed on the hold clock
// (real time), which no socket takes part in.

/** A chunk as a worker posts it. */
const chunk = (n: number) => ({
  output: `t${n}`,
  metrics: { streamIndex: n, part: 0, parts: 1, encoding: "json", bytes: 4 },
});

/**
 * One /stream read at a time (however many workers are connected), so a second read is refused 429
 * while the first is held.
 */
const ONE_READ = { rules: { stream: { perWindow: 2_000, concurrent: 1 } }, concurrentPerWorker: 0 };

/**
 * A harness with an ended job (its id is returned) and a running one taken by w1: a read of the
 * ended job is answered at once, so it can probe whether a read of the running one is held.
 */
async function harnessWithJobs(streamGatherMs: number): Promise<{ h: Harness; ended: string; id: string }> {
  const h = inMemoryHarness({
    takeTimeoutMs: 200,
    streamHoldMs: 10_000,
    streamGatherMs,
    rateLimits: ONE_READ,
  });
  const ended = h.enqueue("local", { input: {} });
  expect((await takeJob(h))?.id).toBe(ended);
  expect(await postDone(h, ended, { output: "done" })).toBe(200);
  const id = h.enqueue("local", { input: {} });
  expect((await takeJob(h))?.id).toBe(id);
  return { h, ended, id };
}

/**
 * Waits until a /stream read is held: a read of the ended job is refused 429 only while another
 * read is in flight, and one that is in flight without chunks to answer with is held. Without
 * this, the first chunk could land before the read arrives, which then answers at once.
 */
async function untilHeld(h: Harness, ended: string): Promise<void> {
  await waitForAsync(
    "the /stream read to be held",
    async () => (await api(h, "GET", `/v2/local/stream/${ended}`)).status === 429,
  );
}

describe("/stream gathering", () => {
  it("keeps a held read open for streamGatherMs after its first chunk, so later chunks join it", async () => {
    const { h, ended, id } = await harnessWithJobs(3_000);
    await using _h = h;
    const read = api(h, "GET", `/v2/local/stream/${id}`);
    await untilHeld(h, ended);
    // Both posts complete (one after the other) well inside the 3 s gather window that the first opens.
    await postChunk(h, id, chunk(0));
    await postChunk(h, id, chunk(1));
    expect((await read).body).toEqual({ status: "IN_PROGRESS", stream: [chunk(0), chunk(1)] });
  });

  it("answers a held read with its first chunk at once when streamGatherMs is 0", async () => {
    const { h, ended, id } = await harnessWithJobs(0);
    await using _h = h;
    const read = api(h, "GET", `/v2/local/stream/${id}`);
    await untilHeld(h, ended);
    await postChunk(h, id, chunk(0));
    // The second chunk is posted only after the read has answered, so it cannot be in it.
    expect((await read).body).toEqual({ status: "IN_PROGRESS", stream: [chunk(0)] });
    await postChunk(h, id, chunk(1));
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({
      status: "IN_PROGRESS",
      stream: [chunk(1)],
    });
  });

  it("refuses a negative streamGatherMs, naming the option", () => {
    expect(() => inMemoryHarness({ streamGatherMs: -1 })).toThrow(/streamGatherMs/);
  });
});
