import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { api, pollStop, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";

describe("harness client API: jobs", () => {
  it("queues a /run job and reports each state with delayTime and executionTime", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const run = await api(h, "POST", "/v2/local/run", { input: { prompt: "hi" } });
    expect(run.status).toBe(200);
    const { id } = run.body as { id: string };
    expect(id).toMatch(/^[0-9a-f-]{36}-e1$/);
    expect(run.body).toEqual({ id, status: "IN_QUEUE" });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({ id, status: "IN_QUEUE" });

    clock.advance(1_500);
    expect(await takeJob(h)).toEqual({ id, input: { prompt: "hi" } });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "IN_PROGRESS",
      delayTime: 1_500,
      workerId: "w1",
    });
    clock.advance(2_000);
    await postDone(h, id, { output: { text: "HI" } });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({
      id,
      status: "COMPLETED",
      delayTime: 1_500,
      executionTime: 2_000,
      output: { text: "HI" },
      workerId: "w1",
    });
  });

  it("answers /run with IN_QUEUE even when a waiting worker takes the job at once", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 10_000 });
    const taking = takeJob(h);
    await expect.poll(() => h.requests({ route: "job-take" }).length).toBe(1);
    const run = await api(h, "POST", "/v2/local/run", { input: {} });
    const { id } = run.body as { id: string };
    expect(run.body).toEqual({ id, status: "IN_QUEUE" });
    expect((await taking)?.id).toBe(id);
  });

  it("answers /runsync with the finished record, its id prefixed sync-", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 5_000 });
    const worker = (async () => {
      const job = await takeJob(h);
      await postDone(h, job!.id, { output: { echo: job!.input } });
    })();
    const res = await api(h, "POST", "/v2/local/runsync?wait=30000", { input: { a: 1 } });
    await worker;
    const body = res.body as { id: string; delayTime: number; executionTime: number };
    expect(res.status).toBe(200);
    expect(body.id).toMatch(/^sync-[0-9a-f-]{36}-e1$/);
    expect(body).toEqual({
      id: body.id,
      status: "COMPLETED",
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      output: { echo: { a: 1 } },
      workerId: "w1",
    });
  });

  it("answers /runsync with the job still queued when wait runs out", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const res = await api(h, "POST", "/v2/local/runsync?wait=1000", { input: {} });
    const id = (res.body as { id: string }).id;
    expect(res.body).toEqual({ id, status: "IN_QUEUE" });
  });

  it("refuses a /runsync wait outside 1000–300000 ms", async () => {
    await using h = inMemoryHarness();
    for (const wait of ["999", "300001", "abc", "1.5"]) {
      const res = await api(h, "POST", `/v2/local/runsync?wait=${wait}`, { input: {} });
      expect(res).toMatchObject({
        status: 400,
        body: { error: `wait must be an integer between 1000 and 300000 ms, got "${wait}"`, status: 400 },
      });
    }
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("waits on /status-sync until the job ends", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    const waiting = api(h, "GET", `/v2/local/status-sync/${id}?wait=30000`);
    await takeJob(h);
    await postDone(h, id, { error: "bad thing" });
    expect((await waiting).body).toEqual({
      id,
      status: "FAILED",
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      error: "bad thing",
      workerId: "w1",
    });
  });

  it("cancels a queued job before any worker sees it", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    expect(await api(h, "POST", `/v2/local/cancel/${id}`)).toMatchObject({
      status: 200,
      body: { id, status: "CANCELLED" },
    });
    expect(await takeJob(h)).toBeUndefined();
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toMatchObject({ id, status: "CANCELLED" });
    expect(h.health("local").jobs).toEqual({
      completed: 0,
      failed: 0,
      inProgress: 0,
      inQueue: 0,
      retried: 0,
    });
  });

  it("cancels a running job and sends its worker a job-stop; a later result is ignored", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    await takeJob(h);
    expect((await api(h, "POST", `/v2/local/cancel/${id}`)).body).toEqual({ id, status: "CANCELLED" });
    expect(await pollStop(h)).toEqual([id]);
    expect(await postDone(h, id, { output: "late" })).toBe(200);
    const status = await api(h, "GET", `/v2/local/status/${id}`);
    expect(status.body).toEqual({
      id,
      status: "CANCELLED",
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
      workerId: "w1",
    });
    expect(h.job(id)?.duplicateResults).toBe(1);
  });

  it("retries a FAILED job under the same id with its original input, and refuses to retry a COMPLETED one", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: { n: 7 } })).body as { id: string };
    await takeJob(h);
    await postDone(h, id, { error: "flaky" });
    expect(await api(h, "POST", `/v2/local/retry/${id}`)).toMatchObject({
      status: 200,
      body: { id, status: "IN_QUEUE" },
    });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toEqual({ id, status: "IN_QUEUE" });
    expect(await takeJob(h, "local", "w2")).toEqual({ id, input: { n: 7 } });
    await postDone(h, id, { output: "fine" }, { workerId: "w2" });
    expect(h.health("local").jobs).toEqual({
      completed: 1,
      failed: 1,
      inProgress: 0,
      inQueue: 0,
      retried: 1,
    });
    expect(await api(h, "POST", `/v2/local/retry/${id}`)).toMatchObject({
      status: 400,
      body: { error: `job "${id}" is COMPLETED: only FAILED or TIMED_OUT jobs can be retried`, status: 400 },
    });
  });

  it("purges waiting jobs only", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(((await api(h, "POST", "/v2/local/run", { input: { i } })).body as { id: string }).id);
    }
    await takeJob(h);
    expect(await api(h, "POST", "/v2/local/purge-queue")).toMatchObject({
      status: 200,
      body: { removed: 3, status: "completed" },
    });
    expect((await api(h, "GET", `/v2/local/status/${ids[0]}`)).body).toMatchObject({ status: "IN_PROGRESS" });
    expect(await api(h, "GET", `/v2/local/status/${ids[1]}`)).toMatchObject({
      status: 404,
      body: { error: `job "${ids[1]}" not found (unknown, or expired)`, status: 404 },
    });
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("reports health true to what is happening", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(((await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string }).id);
    }
    await takeJob(h, "local", "w1");
    await takeJob(h, "local", "w2");
    await postDone(h, ids[0]!, { output: 1 }, { workerId: "w1" });
    await takeJob(h, "local", "w1");
    await postDone(h, ids[2]!, { error: "x" }, { workerId: "w1" });
    expect(await api(h, "GET", "/v2/local/health")).toMatchObject({
      status: 200,
      body: {
        jobs: { completed: 1, failed: 1, inProgress: 1, inQueue: 1, retried: 0 },
        workers: { idle: 1, running: 1, initializing: 0, ready: 1, throttled: 0, unhealthy: 0 },
      },
    });
  });

  it("keeps endpoints apart", async () => {
    await using h = inMemoryHarness({ endpoints: [{ id: "a" }, { id: "b" }], takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/a/run", { input: {} })).body as { id: string };
    expect(await takeJob(h, "b")).toBeUndefined();
    expect((await api(h, "GET", `/v2/b/status/${id}`)).status).toBe(404);
    expect((await takeJob(h, "a"))?.id).toBe(id);
    expect((await api(h, "GET", "/v2/b/health")).body).toMatchObject({ jobs: { inProgress: 0, inQueue: 0 } });
  });

  it("passes s3Config to the worker but never shows it to clients", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const s3Config = {
      accessId: "AK",
      accessSecret: "SECRET-xyz",
      bucketName: "b",
      endpointUrl: "http://s3",
    };
    const run = await api(h, "POST", "/v2/local/run", { input: {}, s3Config });
    const { id } = run.body as { id: string };
    expect(JSON.stringify(run.body)).not.toContain("SECRET-xyz");
    const res = await send(h, "/v2/local/job-take/w1", { headers: { authorization: h.apiKey } });
    expect(await res.json()).toEqual({ id, input: {}, s3Config });
    await postDone(h, id, { output: 1 });
    for (const path of [
      `/v2/local/status/${id}`,
      `/v2/local/status-sync/${id}?wait=1000`,
      `/v2/local/stream/${id}`,
    ]) {
      expect(JSON.stringify((await api(h, "GET", path)).body)).not.toContain("SECRET-xyz");
    }
  });
});
