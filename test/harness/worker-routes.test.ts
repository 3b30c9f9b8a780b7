import { describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { inMemoryHarness, send } from "../support/inject.js";

// The worker routes in memory (test/support/inject.ts); the environment test below listens, as its
// URLs are the subject.

/** GETs a worker route with the raw key (docs/protocol.md, "Headers") unless other headers are given. */
function get(h: Harness, path: string, headers: Record<string, string> = { authorization: h.apiKey }) {
  return send(h, path, { headers });
}

function post(
  h: Harness,
  path: string,
  body: string | Uint8Array,
  contentType = "application/json",
): Promise<Response> {
  return send(h, path, {
    method: "POST",
    headers: { authorization: h.apiKey, "content-type": contentType },
    body: typeof body === "string" ? body : Buffer.from(body),
  });
}

describe("harness worker routes", () => {
  it("answers 401 with a JSON error to a missing key and to the Bearer form", async () => {
    await using h = inMemoryHarness({ apiKey: "k-123", takeTimeoutMs: 200 });
    const none = await get(h, "/v2/local/job-take/w1", {});
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({
      error: "missing or wrong API key: send the raw key in Authorization",
      status: 401,
    });
    const bearer = await get(h, "/v2/local/job-take/w1", { authorization: "Bearer k-123" });
    expect(bearer.status).toBe(401);
    expect(h.requests({ route: "job-take" }).map((r) => r.status)).toEqual([401, 401]);
  });

  it("answers 204 after holding a job-take when no job is queued", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const res = await get(h, "/v2/local/job-take/w1?gpu=unknown&job_in_progress=0");
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    const [rec] = h.requests();
    expect(rec).toMatchObject({
      route: "job-take",
      endpointId: "local",
      method: "GET",
      path: "/v2/local/job-take/w1",
      query: { gpu: "unknown", job_in_progress: "0" },
      body: "",
      status: 204,
    });
    expect(rec?.headers).toMatchObject({ authorization: h.apiKey });
  });

  it("hands a queued job with everything it was sent with and marks it IN_PROGRESS for that worker", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const s3Config = { accessId: "a", accessSecret: "s", bucketName: "b", endpointUrl: "http://s3.test" };
    const id = h.enqueue("local", {
      input: { n: 1 },
      policy: { executionTimeout: 60_000 },
      s3Config,
      webhook: "http://127.0.0.1:9/hook",
    });
    const res = await get(h, "/v2/local/job-take/w1?job_in_progress=0");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      id,
      input: { n: 1 },
      policy: { executionTimeout: 60_000 },
      s3Config,
      webhook: "http://127.0.0.1:9/hook",
    });
    expect(h.job(id)).toMatchObject({ status: "IN_PROGRESS", workerId: "w1" });
  });

  it("wakes a held job-take when a job arrives", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 10_000 });
    const pending = get(h, "/v2/local/job-take/w1");
    await expect.poll(() => h.requests({ route: "job-take" }).length).toBe(1);
    const id = h.enqueue("local", { input: { late: true } });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id, input: { late: true } });
  });

  it("answers job-take-batch with an array of at most batch_size jobs, and 400 to a bad batch_size", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    const first = await get(h, "/v2/local/job-take-batch/w1?batch_size=2&job_in_progress=0");
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual([
      { id: ids[0], input: { n: 1 } },
      { id: ids[1], input: { n: 2 } },
    ]);
    const second = await get(h, "/v2/local/job-take-batch/w1?batch_size=5&job_in_progress=1");
    expect(await second.json()).toEqual([{ id: ids[2], input: { n: 3 } }]);
    const empty = await get(h, "/v2/local/job-take-batch/w1?batch_size=5");
    expect(empty.status).toBe(204);
    const bad = await get(h, "/v2/local/job-take-batch/w1?batch_size=0");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: "batch_size must be an integer ≥ 1, got 0", status: 400 });
  });

  it("accepts job-done as application/json and as application/x-www-form-urlencoded", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const a = h.enqueue("local", { input: {} });
    const b = h.enqueue("local", { input: {} });
    await (await get(h, "/v2/local/job-take-batch/w1?batch_size=2")).json();
    const okJson = await post(
      h,
      `/v2/local/job-done/w1/${a}?isStream=false`,
      JSON.stringify({ output: { x: 1 } }),
    );
    expect(okJson.status).toBe(200);
    const okForm = await post(
      h,
      `/v2/local/job-done/w1/${b}?isStream=true`,
      JSON.stringify({ error: "boom", stopPod: true }),
      "application/x-www-form-urlencoded",
    );
    expect(okForm.status).toBe(200);
    expect(h.job(a)).toMatchObject({
      status: "COMPLETED",
      output: { x: 1 },
      stopPod: false,
      isStream: false,
    });
    expect(h.job(b)).toMatchObject({ status: "FAILED", error: "boom", stopPod: true, isStream: true });
    expect(h.job(a)?.executionTime).toEqual(expect.any(Number));
  });

  it("treats an object in error as a result without output, as the platform does", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    await post(h, `/v2/local/job-done/w1/${id}?isStream=false`, JSON.stringify({ error: { message: "x" } }));
    const job = h.job(id);
    expect(job?.status).toBe("COMPLETED");
    expect(job && "output" in job).toBe(false);
    expect(job?.error).toBeUndefined();
  });

  it("rejects a job-done body that is not JSON, or sent as text/plain, with 400", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    const notJson = await post(h, `/v2/local/job-done/w1/${id}`, "{nope");
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: string }).error).toMatch(/^job-done body is not JSON: /);
    const plain = await post(h, `/v2/local/job-done/w1/${id}`, "{}", "text/plain");
    expect(await plain.json()).toEqual({
      error:
        'job-done takes a JSON body as application/json or application/x-www-form-urlencoded, got "text/plain"',
      status: 400,
    });
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    const unknown = await post(h, "/v2/local/job-done/w1/nope", "{}");
    expect(unknown.status).toBe(404);
  });

  it("refuses job-stream bodies of any size that are not UTF-8 or not JSON, and stores large ones exactly", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    const url = `/v2/local/job-stream/w1/${id}`;
    const plain = "plain text ".repeat(80_000); // 880 kB: arrives in many pieces
    const mixed = 'é😀 "quoted" '.repeat(30_000);
    // One stray byte in the middle of a large body.
    const broken = Buffer.from(JSON.stringify({ output: plain }));
    broken[400_000] = 0xff;
    const bad = await post(h, url, broken);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: "job-stream body is not valid UTF-8", status: 400 });
    // A leading BOM is kept, so JSON.parse refuses it.
    const bom = await post(
      h,
      url,
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ output: plain }))]),
    );
    expect(bom.status).toBe(400);
    expect(((await bom.json()) as { error: string }).error).toMatch(/^job-stream body is not JSON: /);
    // A raw control character inside a large slice.
    const control = await post(
      h,
      url,
      `{"output":"${plain.slice(0, 400_000)}\u0007${plain.slice(0, 400_000)}"}`,
    );
    expect(control.status).toBe(400);
    expect(((await control.json()) as { error: string }).error).toMatch(/^job-stream body is not JSON: /);
    for (const output of [plain, mixed]) {
      const ok = await post(h, url, JSON.stringify({ output, metrics: { part: 0 } }));
      expect(ok.status).toBe(200);
    }
    expect(h.job(id)?.stream).toEqual([
      { output: plain, metrics: { part: 0 } },
      { output: mixed, metrics: { part: 0 } },
    ]);
    // The request log keeps each body as it came, the broken one decoded with U+FFFD.
    const bodies = h.requests({ route: "job-stream" }).map((r) => r.body);
    expect(bodies[0]).toBe(broken.toString("utf8"));
    expect(bodies[0]).toContain("\ufffd");
    expect(bodies[3]).toBe(JSON.stringify({ output: plain, metrics: { part: 0 } }));
  });

  it("records progress updates and stream chunks in order, then the final result", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    for (const p of [1, 2, 3]) {
      const r = await post(
        h,
        `/v2/local/job-done/w1/${id}?isStream=false`,
        JSON.stringify({ status: "IN_PROGRESS", output: p }),
      );
      expect(r.status).toBe(200);
    }
    for (const c of ["a", "b"]) {
      const r = await post(
        h,
        `/v2/local/job-stream/w1/${id}?isStream=false`,
        JSON.stringify({ output: c, metrics: { n: 1 } }),
      );
      expect(r.status).toBe(200);
    }
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    await post(h, `/v2/local/job-done/w1/${id}?isStream=true`, JSON.stringify({ output: [] }));
    expect(h.job(id)).toMatchObject({
      status: "COMPLETED",
      progress: [1, 2, 3],
      stream: [
        { output: "a", metrics: { n: 1 } },
        { output: "b", metrics: { n: 1 } },
      ],
      output: [],
      isStream: true,
    });
  });

  it("keeps a chunk exactly as the chunk schema would, whichever way the body is checked", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    const url = `/v2/local/job-stream/w1/${id}?isStream=false`;
    const sent = [
      // Taken as they are: output, then metrics of plain values (a runlet worker's every post).
      '{"output":"a"}',
      '{"output":{"t":1},"metrics":{"part":0,"encoding":"json","ok":true,"none":null}}',
      // Through the schema: another member order, an unknown member, metrics that is not a record.
      '{"metrics":{"n":1},"output":"b"}',
      '{"output":"c","extra":1}',
      '{"output":"d","metrics":{},"extra":1}',
    ];
    for (const body of sent) expect((await post(h, url, body)).status).toBe(200);
    for (const bad of [
      '{"output":"e","metrics":{"n":{"deep":1}}}',
      '{"output":"e","metrics":[1]}',
      '{"output":"e","metrics":null}',
      '{"output":"e","metrics":"x"}',
    ]) {
      const refused = await post(h, url, bad);
      expect(refused.status, bad).toBe(400);
      expect(((await refused.json()) as { error: string }).error).toMatch(
        /^job-stream body must be \{output, metrics\?\}: /,
      );
    }
    const stream = h.job(id)?.stream ?? [];
    expect(stream.map((chunk) => JSON.stringify(chunk))).toEqual([
      '{"output":"a"}',
      '{"output":{"t":1},"metrics":{"part":0,"encoding":"json","ok":true,"none":null}}',
      '{"output":"b","metrics":{"n":1}}',
      '{"output":"c"}',
      '{"output":"d","metrics":{}}',
    ]);
  });

  it("answers a duplicate final result 200 but ignores and counts it", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    await post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: 1 }));
    const again = await post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: 2 }));
    expect(again.status).toBe(200);
    const late = await post(h, `/v2/local/job-stream/w1/${id}`, JSON.stringify({ output: "x" }));
    expect(late.status).toBe(200);
    expect(h.job(id)).toMatchObject({
      status: "COMPLETED",
      output: 1,
      duplicateResults: 1,
      latePosts: 1,
      stream: [],
    });
  });

  it("tells the worker to stop a job through job-stop and ends the job CANCELLED", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 300 });
    const idle = await get(h, "/v2/local/job-stop/w1");
    expect(idle.status).toBe(204);
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    const held = get(h, "/v2/local/job-stop/w1");
    await expect.poll(() => h.requests({ route: "job-stop" }).length).toBe(2);
    h.stopJob(id);
    const res = await held;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ jobsToStop: [id] });
    expect(h.job(id)?.status).toBe("CANCELLED");
    await post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: "too late" }));
    expect(h.job(id)).toMatchObject({ status: "CANCELLED", duplicateResults: 1 });
    expect(h.job(id) && "output" in h.job(id)!).toBe(false);
  });

  it("records a ping's job ids and version", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const res = await get(h, "/v2/local/ping/w1?gpu=unknown&job_id=a,b&runpod_version=0.1.0");
    expect(res.status).toBe(200);
    expect(h.requests({ route: "ping" })[0]?.query).toEqual({
      gpu: "unknown",
      job_id: "a,b",
      runpod_version: "0.1.0",
    });
    expect(h.health("local").workers).toMatchObject({ idle: 1, running: 0 });
  });

  it("keeps the latest maxRecordedRequests requests, numbered in arrival order", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200, maxRecordedRequests: 2 });
    for (const n of [1, 2, 3]) await get(h, `/v2/local/ping/w${n}`);
    expect(h.requests().map((r) => [r.seq, r.path])).toEqual([
      [1, "/v2/local/ping/w2"],
      [2, "/v2/local/ping/w3"],
    ]);
  });

  it("answers an injected status without applying the request, with Retry-After", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    h.injectFault("job-take", { status: 429, retryAfterSec: 3 }, 2);
    for (let i = 0; i < 2; i++) {
      const res = await get(h, "/v2/local/job-take/w1");
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("3");
      expect(await res.json()).toEqual({ error: "injected fault: 429", status: 429 });
    }
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    const res = await get(h, "/v2/local/job-take/w1");
    expect(res.status).toBe(200);
    expect(h.requests({ route: "job-take" }).map((r) => r.status)).toEqual([429, 429, 200]);
  });

  it("drops a connection without applying the request, and delays then applies", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await get(h, "/v2/local/job-take/w1");
    h.injectFault("job-done", { drop: true });
    await expect(post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: 1 }))).rejects.toThrow();
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    h.injectFault("job-done", { delayMs: 50 });
    const res = await post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: 2 }));
    expect(res.status).toBe(200);
    expect(h.job(id)).toMatchObject({ status: "COMPLETED", output: 2, duplicateResults: 0 });
    const done = h.requests({ route: "job-done" });
    expect(done.map((r) => [r.status, r.body])).toEqual([
      ["dropped", '{"output":1}'],
      [200, '{"output":2}'],
    ]);
  });

  it("answers 404 for an unknown endpoint and 405 for a wrong method", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const unknown = await get(h, "/v2/nope/job-take/w1");
    expect(await unknown.json()).toEqual({ error: 'endpoint "nope" not found', status: 404 });
    const wrong = await post(h, "/v2/local/job-take/w1", "{}");
    expect(wrong.status).toBe(405);
    expect(await wrong.json()).toEqual({ error: "job-take takes GET, got POST", status: 405 });
  });

  it("gives a worker the platform's environment for an endpoint, in production's template shapes (the Environment of docs/protocol.md)", async () => {
    await using h = await startHarness({ endpoints: [{ id: "ep1" }], takeTimeoutMs: 200 });
    expect(h.workerEnv("ep1", { podId: "pod-1", pingIntervalMs: 500 })).toEqual({
      RUNPOD_WEBHOOK_GET_JOB: `${h.url}/v2/ep1/job-take/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
      RUNPOD_WEBHOOK_POST_OUTPUT: `${h.url}/v2/ep1/job-done/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
      RUNPOD_WEBHOOK_POST_STREAM: `${h.url}/v2/ep1/job-stream/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
      RUNPOD_WEBHOOK_PING: `${h.url}/v2/ep1/ping/$RUNPOD_POD_ID?gpu=$RUNPOD_GPU_TYPE_ID`,
      RUNPOD_AI_API_KEY: h.apiKey,
      RUNPOD_POD_ID: "pod-1",
      RUNPOD_POD_HOSTNAME: "pod-1",
      RUNPOD_GPU_TYPE_ID: "LOCAL",
      RUNPOD_PING_INTERVAL: "500",
    });
    expect(h.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("takes the GPU type from the harness option or workerEnv's, and the host name from workerEnv's", async () => {
    await using h = inMemoryHarness({ gpuTypeId: "NVIDIA-A100", takeTimeoutMs: 200 });
    const env = h.workerEnv("local", { podId: "p" });
    expect(env["RUNPOD_GPU_TYPE_ID"]).toBe("NVIDIA-A100");
    expect(env["RUNPOD_ENDPOINT_ID"]).toBeUndefined();
    expect(h.workerEnv("local", { podId: "p", gpuTypeId: "H100", hostname: "host-9" })).toMatchObject({
      RUNPOD_GPU_TYPE_ID: "H100",
      RUNPOD_POD_HOSTNAME: "host-9",
    });
    await expect(startHarness({ gpuTypeId: " " })).rejects.toThrow(/gpuTypeId must be a non-empty string/);
  });

  it("waitForJob resolves at the terminal state and rejects when the wait runs out", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await expect(h.waitForJob(id, { timeoutMs: 50 })).rejects.toThrow(/still IN_QUEUE after 50 ms/);
    const waiting = h.waitForJob(id, { timeoutMs: 5_000 });
    await get(h, "/v2/local/job-take/w1");
    await post(h, `/v2/local/job-done/w1/${id}`, JSON.stringify({ output: "ok" }));
    expect(await waiting).toMatchObject({ id, status: "COMPLETED", output: "ok" });
  });

  it("closes while a job-take is held, answering it", async () => {
    const h = await startHarness({ takeTimeoutMs: 30_000 });
    const held = get(h, "/v2/local/job-take/w1");
    await expect.poll(() => h.requests().length).toBe(1);
    await h.close();
    await h.close();
    expect((await held).status).toBe(204);
  });
});
