import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { api, pollStop, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";

describe("harness client API: timeouts, ttl, retention, heartbeat lapses", () => {
  it("times a running job out at policy.executionTimeout and sends its worker a job-stop", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const run = await api(h, "POST", "/v2/local/run", { input: {}, policy: { executionTimeout: 5_000 } });
    const { id } = run.body as { id: string };
    await takeJob(h);
    clock.advance(4_999);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toMatchObject({ status: "IN_PROGRESS" });
    clock.advance(1);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "TIMED_OUT",
      delayTime: 0,
      executionTime: 5_000,
      error: "job timed out after 5000 ms (executionTimeout)",
      workerId: "w1",
    });
    expect(await pollStop(h)).toEqual([id]);
    await postDone(h, id, { output: "late" });
    expect(h.job(id)).toMatchObject({ status: "TIMED_OUT", duplicateResults: 1 });
    expect(h.health("local").jobs.failed).toBe(1);
    // TIMED_OUT jobs can be retried.
    expect((await api(h, "POST", `/v2/local/retry/${id}`)).body).toEqual({ id, status: "IN_QUEUE" });
  });

  it("uses the endpoint's execution timeout when the job has none", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, endpoints: [{ id: "local", executionTimeoutMs: 7_000 }] });
    const id = h.enqueue("local", { input: {} });
    await takeJob(h);
    clock.advance(7_000);
    expect(h.job(id)?.status).toBe("TIMED_OUT");
  });

  it("deletes a job when its ttl elapses, even while it runs, and /status answers 404", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {}, policy: { ttl: 10_000 } })).body as {
      id: string;
    };
    clock.advance(6_000);
    await takeJob(h);
    clock.advance(4_000);
    expect(await api(h, "GET", `/v2/local/status/${id}`)).toEqual(
      expect.objectContaining({
        status: 404,
        body: { error: `job "${id}" not found (unknown, or expired)`, status: 404 },
      }),
    );
    expect(await pollStop(h)).toEqual([id]);
    expect(await postDone(h, id, { output: 1 })).toBe(200);
    expect(h.job(id)).toMatchObject({ deleted: true, duplicateResults: 1 });
    expect((await api(h, "POST", `/v2/local/cancel/${id}`)).status).toBe(404);
  });

  it("deletes a queued job when its ttl elapses", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {}, policy: { ttl: 10_000 } })).body as {
      id: string;
    };
    clock.advance(10_000);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).status).toBe(404);
    expect(await takeJob(h)).toBeUndefined();
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("sets a job's remaining life with /status?ttl=", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    expect((await api(h, "GET", `/v2/local/status/${id}?ttl=5000`)).status).toBe(200);
    clock.advance(4_999);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).status).toBe(200);
    clock.advance(1);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).status).toBe(404);
  });

  it("refuses a bad /status ttl with 400", async () => {
    await using h = inMemoryHarness();
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    expect(await api(h, "GET", `/v2/local/status/${id}?ttl=-1`)).toMatchObject({
      status: 400,
      body: { error: 'ttl must be an integer between 1 and 604800000 ms, got "-1"', status: 400 },
    });
  });

  it("keeps a /run result 30 minutes, then answers 404 and refuses a retry", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    await takeJob(h);
    await postDone(h, id, { error: "x" });
    clock.advance(30 * 60_000 - 1);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toMatchObject({ status: "FAILED" });
    clock.advance(1);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).status).toBe(404);
    expect((await api(h, "POST", `/v2/local/retry/${id}`)).status).toBe(404);
  });

  it("keeps a /runsync result 1 minute, or as long as an explicit wait up to 5 minutes", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const ids: string[] = [];
    for (const query of ["wait=1000", "wait=1000", "wait=120000"]) {
      const pending = api(h, "POST", `/v2/local/runsync?${query}`, { input: {} });
      const job = await takeJob(h);
      await postDone(h, job!.id, { output: 1 });
      ids.push(((await pending).body as { id: string }).id);
    }
    // The first two asked for wait=1000: below the 1 minute floor, so they keep 60 s.
    clock.advance(60_000);
    expect((await api(h, "GET", `/v2/local/status/${ids[0]}`)).status).toBe(404);
    expect((await api(h, "GET", `/v2/local/status/${ids[2]}`)).status).toBe(200);
    clock.advance(60_000);
    expect((await api(h, "GET", `/v2/local/status/${ids[2]}`)).status).toBe(404);
  });

  it("requeues the jobs of a worker that stops heartbeating, then fails a job whose worker lapses again", async () => {
    const clock = new ManualClock();
    // The platform's rule (only pings keep a worker alive), not the in-memory default.
    await using h = inMemoryHarness({
      clock,
      heartbeatTimeoutMs: 1_000,
      takeTimeoutMs: 200,
      keepAliveBy: "pings",
    });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: { x: 1 } })).body as { id: string };
    await takeJob(h, "local", "w1");
    clock.advance(999);
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    clock.advance(1);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({ id, status: "IN_QUEUE" });
    expect(h.health("local").jobs.retried).toBe(1);
    expect(h.health("local").workers).toMatchObject({ idle: 0, running: 0 });

    expect(await takeJob(h, "local", "w2")).toEqual({ id, input: { x: 1 } });
    clock.advance(1_000);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toMatchObject({
      id,
      status: "FAILED",
      error:
        "worker w2 stopped sending heartbeats (no ping for 1000 ms) while running this job, for the second time",
    });
  });

  it("keeps a worker that pings alive while it runs a job", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, heartbeatTimeoutMs: 1_000, takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await takeJob(h);
    for (let i = 0; i < 5; i++) {
      clock.advance(600);
      await send(h, `/v2/local/ping/w1?job_id=${id}`, { headers: { authorization: h.apiKey } });
    }
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    expect(h.health("local").workers).toMatchObject({ running: 1, idle: 0 });
  });
});
