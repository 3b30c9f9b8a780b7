import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { api, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness } from "../support/inject.js";

describe("/status of a running job", () => {
  it("shows the latest progress update as output while the job runs, then the final output", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    expect((await takeJob(h))?.id).toBe(id);

    // Taken, no update yet: no output.
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "IN_PROGRESS",
      delayTime: 0,
      workerId: "w1",
    });
    expect(await postDone(h, id, { status: "IN_PROGRESS", output: { step: 1, of: 3 } })).toBe(200);
    expect(await postDone(h, id, { status: "IN_PROGRESS", output: "two of three" })).toBe(200);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "IN_PROGRESS",
      delayTime: 0,
      output: "two of three",
      workerId: "w1",
    });
    // /runsync and /status-sync answers that end before the job carry it too.
    expect((await api(h, "GET", `/v2/local/status-sync/${id}?wait=1000`)).body).toMatchObject({
      status: "IN_PROGRESS",
      output: "two of three",
    });

    clock.advance(250);
    expect(await postDone(h, id, { output: { done: true } })).toBe(200);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "COMPLETED",
      delayTime: 0,
      executionTime: 250,
      output: { done: true },
      workerId: "w1",
    });
    expect(h.job(id)?.progress).toEqual([{ step: 1, of: 3 }, "two of three"]);
  });

  it("drops the progress output when the job fails, and when it is retried", async () => {
    await using h = inMemoryHarness({ clock: new ManualClock(), takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    await takeJob(h);
    await postDone(h, id, { status: "IN_PROGRESS", output: 50 });
    await postDone(h, id, { error: "boom" });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "FAILED",
      delayTime: 0,
      executionTime: 0,
      error: "boom",
      workerId: "w1",
    });
    expect((await api(h, "POST", `/v2/local/retry/${id}`)).status).toBe(200);
    await takeJob(h);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "IN_PROGRESS",
      delayTime: 0,
      workerId: "w1",
    });
  });
});
