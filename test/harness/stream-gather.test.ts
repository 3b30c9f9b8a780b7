import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { api, postChunk, takeJob } from "./helpers.js";

/** A chunk as a worker posts it. */
const chunk = (n: number) => ({
  output: `t${n}`,
  metrics: { streamIndex: n, part: 0, parts: 1, encoding: "json", bytes: 4 },
});

describe("/stream gathering", () => {
  it("keeps a held read open for streamGatherMs after its first chunk, so later chunks join it", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200, streamHoldMs: 10_000, streamGatherMs: 3_000 });
    const id = h.enqueue("local", { input: {} });
    expect((await takeJob(h))?.id).toBe(id);
    const read = api(h, "GET", `/v2/local/stream/${id}`);
    // Both posts complete (one after the other) well inside the 3 s gather window that the first opens.
    await postChunk(h, id, chunk(0));
    await postChunk(h, id, chunk(1));
    expect((await read).body).toEqual({ status: "IN_PROGRESS", stream: [chunk(0), chunk(1)] });
  });

  it("answers a held read with its first chunk at once when streamGatherMs is 0", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200, streamHoldMs: 10_000, streamGatherMs: 0 });
    const id = h.enqueue("local", { input: {} });
    expect((await takeJob(h))?.id).toBe(id);
    const read = api(h, "GET", `/v2/local/stream/${id}`);
    await postChunk(h, id, chunk(0));
    // The second chunk is posted only after the read has answered, so it cannot be in it.
    expect((await read).body).toEqual({ status: "IN_PROGRESS", stream: [chunk(0)] });
    await postChunk(h, id, chunk(1));
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({
      status: "IN_PROGRESS",
      stream: [chunk(1)],
    });
  });

  it("refuses a negative streamGatherMs, naming the option", async () => {
    await expect(startHarness({ streamGatherMs: -1 })).rejects.toThrow(/streamGatherMs/);
  });
});
