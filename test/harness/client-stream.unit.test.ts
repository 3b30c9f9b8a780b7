import { describe, expect, it } from "vitest";
import { api, postChunk, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness } from "../support/inject.js";

describe("harness client API: /stream", () => {
  it("answers each reader with the chunks since its last read, and the end only once all are read", async () => {
    await using h = inMemoryHarness({
      takeTimeoutMs: 200,
      streamHoldMs: 100,
      keys: [{ key: "other", endpoints: ["local"] }],
    });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({ status: "IN_QUEUE", stream: [] });
    await takeJob(h);
    await postChunk(h, id, { output: "a", metrics: { streamIndex: 0 } });
    await postChunk(h, id, { output: "b" });
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({
      status: "IN_PROGRESS",
      stream: [{ output: "a", metrics: { streamIndex: 0 } }, { output: "b" }],
    });
    await postChunk(h, id, { output: "c" });
    await postDone(h, id, { output: [] }, { isStream: true });
    // Another reader starts from the beginning.
    expect((await api(h, "GET", `/v2/local/stream/${id}`, undefined, { key: "other" })).body).toEqual({
      status: "COMPLETED",
      stream: [{ output: "a", metrics: { streamIndex: 0 } }, { output: "b" }, { output: "c" }],
    });
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({
      status: "COMPLETED",
      stream: [{ output: "c" }],
    });
    expect((await api(h, "GET", `/v2/local/stream/${id}`)).body).toEqual({ status: "COMPLETED", stream: [] });
  });

  it("holds a read open until a chunk arrives", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200, streamHoldMs: 10_000 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    await takeJob(h);
    const reading = api(h, "GET", `/v2/local/stream/${id}`);
    await postChunk(h, id, { output: 42 });
    expect((await reading).body).toEqual({ status: "IN_PROGRESS", stream: [{ output: 42 }] });
  });

  it("answers 404 for an unknown job", async () => {
    await using h = inMemoryHarness();
    expect(await api(h, "GET", "/v2/local/stream/nope")).toMatchObject({
      status: 404,
      body: { error: 'job "nope" not found (unknown, or expired)', status: 404 },
    });
  });
});
