import { describe, expect, it } from "vitest";
import { type JobEvent, ManualClock } from "../../src/harness/index.js";
import { api, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";

describe("Harness.onJobEvent", () => {
  it("reports progress, stream chunks and ends in order, a cancel included, and survives a listener that throws", async () => {
    await using h = inMemoryHarness({ clock: new ManualClock(), takeTimeoutMs: 200 });
    const events: JobEvent[] = [];
    h.onJobEvent(() => {
      throw new Error("a buggy listener");
    });
    const stop = h.onJobEvent((e) => events.push(e));
    const a = h.enqueue("local", { input: {}, id: "a" });
    expect((await takeJob(h))?.id).toBe(a);
    await postDone(h, a, { status: "IN_PROGRESS", output: 1 });
    const stream = await send(h, `/v2/local/job-stream/w1/${a}`, {
      method: "POST",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ output: "chunk" }),
    });
    expect(stream.status).toBe(200);
    await postDone(h, a, { output: { ok: true } }, { isStream: true });
    const b = h.enqueue("local", { input: {}, id: "b" });
    expect((await api(h, "POST", `/v2/local/cancel/${b}`)).status).toBe(200);
    stop();
    h.enqueue("local", { input: {}, id: "c" });
    expect((await api(h, "POST", "/v2/local/cancel/c")).status).toBe(200);

    expect(
      events.map((e) => (e.type === "end" ? `${e.jobId} end ${e.job.status}` : `${e.jobId} ${e.type}`)),
    ).toEqual(["a progress", "a stream", "a end COMPLETED", "b end CANCELLED"]);
    expect(events[0]).toEqual({ type: "progress", jobId: "a", endpointId: "local", output: 1 });
    expect(events[1]).toEqual({
      type: "stream",
      jobId: "a",
      endpointId: "local",
      index: 1,
      chunk: { output: "chunk" },
    });
    expect(events[2]).toMatchObject({ job: { id: "a", status: "COMPLETED", output: { ok: true } } });
  });
});

describe("rate-limit windows", () => {
  it("admits every request while no window gets more than its rate, and refuses the first one past it", async () => {
    // What a slow machine looks like to the limiter: requests spread over many windows.
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      clock,
      rateLimits: { windowMs: 1_000, rules: { run: { perWindow: 3, concurrent: null } } },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) {
      statuses.push((await api(h, "POST", "/v2/local/run", { input: {} })).status);
      clock.advance(400); // 2.5 requests per window
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200]);
    // The same number within one window: the fourth is refused.
    clock.advance(1_000);
    const burst: number[] = [];
    for (let i = 0; i < 4; i++) burst.push((await api(h, "POST", "/v2/local/run", { input: {} })).status);
    expect(burst).toEqual([200, 200, 200, 429]);
  });
});
