import { describe, expect, it } from "vitest";
import { createClient } from "../../src/client/index.js";
import { startHarness } from "../../src/harness/index.js";
import { splitItem } from "../../src/stream/index.js";

// The client against runlet's real harness over loopback, with jobs enqueued and no runlet
// worker: where a job must move, the test plays the worker with plain HTTP on the worker routes.

async function workerPost(url: string, key: string, body: unknown): Promise<number> {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: key, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  await res.text();
  return res.status;
}

async function takeJob(url: string, key: string): Promise<{ id: string; input: unknown }> {
  const res = await fetch(`${url}/v2/local/job-take/w1?job_in_progress=0`, {
    headers: { authorization: key },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { id: string; input: unknown };
}

describe("client against the harness, no worker", () => {
  it("queues a job with run, reads it with status and health, cancels it", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint<{ n: number }>("local");
    const ref = await ep.run({ input: { n: 1 } });
    expect(ref.status).toBe("IN_QUEUE");
    expect(ref.id).toMatch(/\S/);
    const record = await ep.status(ref.id);
    expect(record).toMatchObject({ id: ref.id, status: "IN_QUEUE" });
    expect((await ep.health()).jobs).toEqual({
      completed: 0,
      failed: 0,
      inProgress: 0,
      inQueue: 1,
      retried: 0,
    });
    expect(await ep.cancel(ref.id)).toEqual({ id: ref.id, status: "CANCELLED" });
    expect((await ep.status(ref.id)).status).toBe("CANCELLED");
    expect((await ep.health()).jobs.inQueue).toBe(0);
  });

  it("purges waiting jobs and reports how many", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await ep.run({ input: { i } })).id);
    expect(await ep.purgeQueue()).toEqual({ removed: 3, status: "completed" });
    expect((await ep.health()).jobs.inQueue).toBe(0);
  });

  it("returns the queued record from runsync when no worker finishes it within wait", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
    const record = await ep.runsync({ input: { q: 1 } }, { waitMs: 1_000 });
    expect(record.id).toMatch(/^sync-/);
    expect(record.status).toBe("IN_QUEUE");
  });

  it("turns the harness's error answers into RUNLET_CLIENT_HTTP with status and message", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
    await expect(ep.status("no-such-job")).rejects.toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      message:
        'GET /v2/local/status/no-such-job answered 404: job "no-such-job" not found (unknown, or expired)',
      details: { status: 404 },
    });
    const { id } = await ep.run({ input: {} });
    await expect(ep.retry(id)).rejects.toMatchObject({
      details: { status: 400 },
      message: `POST /v2/local/retry/${id} answered 400: job "${id}" is IN_QUEUE: only FAILED or TIMED_OUT jobs can be retried`,
    });
    const wrongKey = createClient({ apiKey: "wrong", baseUrl: h.url }).endpoint("local");
    await expect(wrongKey.health()).rejects.toMatchObject({
      message: "GET /v2/local/health answered 401: missing or wrong API key",
      details: { status: 401 },
    });
    await expect(ep.run({ input: {}, policy: { ttl: 5 } })).rejects.toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      details: { status: 400 },
    });
  });

  it("waits for a job a worker completes, and streams what it posted, split items whole", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint<
      Record<string, unknown>,
      unknown,
      unknown
    >("local");
    const { id } = await ep.run({ input: { go: true } });
    const job = await takeJob(h.url, h.apiKey);
    expect(job.id).toBe(id);
    const big = 'ü😀"\n'.repeat(300_000); // ~3.3 MB of JSON: split in 4 chunks
    const chunks = [...splitItem("hello", 0), ...splitItem(big, 1), ...splitItem(Buffer.from([1, 2, 3]), 2)];
    expect(chunks.length).toBeGreaterThan(4);
    const streamUrl = `${h.url}/v2/local/job-stream/w1/${id}?isStream=false`;
    for (const chunk of chunks) expect(await workerPost(streamUrl, h.apiKey, chunk)).toBe(200);
    expect(
      await workerPost(`${h.url}/v2/local/job-done/w1/${id}?isStream=true`, h.apiKey, { output: [] }),
    ).toBe(200);
    const final = await ep.wait(id, { pollIntervalMs: 20, timeoutMs: 10_000 });
    expect(final).toMatchObject({ id, status: "COMPLETED", output: [] });
    const values: unknown[] = [];
    for await (const value of ep.stream(id)) values.push(value);
    expect(values.length).toBe(3);
    expect(values[0]).toBe("hello");
    expect(values[1] === big).toBe(true);
    expect(Buffer.from([1, 2, 3]).equals(values[2] as Buffer)).toBe(true);
  });

  it("streams every item of a job that then fails, and throws the job's error", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
    const { id } = await ep.run({ input: {} });
    await takeJob(h.url, h.apiKey);
    const streamUrl = `${h.url}/v2/local/job-stream/w1/${id}?isStream=false`;
    for (let i = 0; i < 3; i++) await workerPost(streamUrl, h.apiKey, splitItem(`t${i}`, i)[0]);
    await workerPost(`${h.url}/v2/local/job-done/w1/${id}?isStream=true`, h.apiKey, {
      error: "model crashed",
    });
    const values: unknown[] = [];
    const error = await (async () => {
      for await (const value of ep.stream(id)) values.push(value);
    })().catch((e: unknown) => e);
    expect(values).toEqual(["t0", "t1", "t2"]);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_JOB_FAILED",
      message: `job ${id} ended FAILED: model crashed`,
      details: { id, status: "FAILED", error: "model crashed" },
    });
  });
});
