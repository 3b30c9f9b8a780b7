import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { api, postDone } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";
import { waitFor } from "../support/wait-for.js";

/**
 * docs/protocol.md, "Job bodies": the service only passes `s3Config` through, and docs/protocol.md, "Taking jobs" says a job
 * carries keys beyond `id` and `input`. What a client sends reaches the worker's job untouched,
 * and `s3Config` never reaches a client or a log line.
 */

/** A worker's job-take as a plain request: the parsed body exactly as the worker receives it. */
async function take(h: Harness, workerId = "w1"): Promise<{ status: number; job: unknown }> {
  const res = await send(h, `/v2/local/job-take/${workerId}?job_in_progress=0`, {
    headers: { authorization: h.apiKey },
  });
  const text = await res.text();
  return { status: res.status, job: text === "" ? undefined : JSON.parse(text) };
}

const SECRET = "SECRET-pass-through-42";

describe("harness pass-through of job request bodies", () => {
  it("delivers unknown top-level keys, unknown policy keys and s3Config's unknown keys to the worker untouched", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const s3Config = {
      accessId: "AK",
      accessSecret: SECRET,
      bucketName: "bucket",
      endpointUrl: "http://s3.test",
      objectPath: "runs/{jobId}",
    };
    const policy = { executionTimeout: 60_000, ttl: 120_000, lowPriority: true, priorityClass: "batch" };
    const webhookV2 = { url: "http://hooks.test/v2", headers: { "x-token": "t" } };
    const run = await api(h, "POST", "/v2/local/run", {
      input: { prompt: "hi" },
      s3Config,
      policy,
      webhook: "http://hooks.test/v1",
      webhookV2,
      batchId: "batch-7",
      // A client cannot choose the delivered job's id.
      id: "client-chosen",
    });
    expect(run.status).toBe(200);
    const { id } = run.body as { id: string };
    expect(run.body).toEqual({ id, status: "IN_QUEUE" });
    expect(id).not.toBe("client-chosen");

    expect(await take(h)).toEqual({
      status: 200,
      job: {
        id,
        input: { prompt: "hi" },
        policy,
        s3Config,
        webhook: "http://hooks.test/v1",
        webhookV2,
        batchId: "batch-7",
      },
    });
  });

  it("accepts a partial s3Config (no endpointUrl) on /runsync and delivers it as sent; clients never see it", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const s3Config = { accessId: "AK", accessSecret: SECRET, bucketName: "bucket" };
    const runsync = api(h, "POST", "/v2/local/runsync?wait=5000", {
      input: { n: 1 },
      s3Config,
      webhookV2: { url: "http://hooks.test" },
    });
    let taken: { status: number; job: unknown } = { status: 204, job: undefined };
    for (let i = 0; i < 50 && taken.status === 204; i++) taken = await take(h);
    const id = (taken.job as { id: string }).id;
    expect(id).toMatch(/^sync-/);
    expect(taken).toEqual({
      status: 200,
      job: { id, input: { n: 1 }, s3Config, webhookV2: { url: "http://hooks.test" } },
    });
    expect(await postDone(h, id, { output: { ok: true } })).toBe(200);

    const answer = await runsync;
    expect(answer.status).toBe(200);
    const record = answer.body as Record<string, unknown>;
    expect(Object.keys(record).sort()).toEqual([
      "delayTime",
      "executionTime",
      "id",
      "output",
      "status",
      "workerId",
    ]);
    expect(record).toMatchObject({ id, status: "COMPLETED", output: { ok: true }, workerId: "w1" });
    const status = await api(h, "GET", `/v2/local/status/${id}`);
    expect(Object.keys(status.body as object).sort()).toEqual(Object.keys(record).sort());
  });

  it("delivers the extra keys of an in-process enqueue, and never lets them replace the job's own keys", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", {
      input: { a: 1 },
      extra: { batchId: "b-1", id: "not-this", input: "not-this", custom: [1, 2] },
    });
    expect(await take(h)).toEqual({
      status: 200,
      job: { id, input: { a: 1 }, batchId: "b-1", custom: [1, 2] },
    });
  });

  it("writes no s3Config secret into any log line, even when the job's webhook fails", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    });
    await using h = inMemoryHarness({
      takeTimeoutMs: 200,
      logger: pino({ level: "trace" }, sink),
      webhooks: { retries: 0, retryDelayMs: 1, timeoutMs: 2_000 },
    });
    const run = await api(h, "POST", "/v2/local/run", {
      input: {},
      // Port 9 (discard) on loopback: nothing listens, the webhook call fails at once.
      webhook: "http://127.0.0.1:9/hook",
      s3Config: { accessId: "AK", accessSecret: SECRET, objectPath: "p" },
    });
    const { id } = run.body as { id: string };
    const taken = await take(h);
    expect((taken.job as { s3Config: unknown }).s3Config).toEqual({
      accessId: "AK",
      accessSecret: SECRET,
      objectPath: "p",
    });
    expect(await postDone(h, id, { output: 1 })).toBe(200);
    await waitFor("the webhook's delivery", () => h.webhookAttempts().length > 0);
    expect(h.webhookAttempts()).toHaveLength(1);
    // A malformed body is refused without quoting it.
    const bad = await api(h, "POST", "/v2/local/run", undefined, {
      rawBody: `{"input":{},"s3Config":{"accessSecret":"${SECRET}"},}`,
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).not.toContain(SECRET);
    await h.close();
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join("")).not.toContain(SECRET);
  });
});
