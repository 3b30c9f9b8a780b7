import { describe, expect, it } from "vitest";
import { sendJson } from "../../src/harness/http/http-util.js";
import { ManualClock } from "../../src/harness/index.js";
import { api } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";

describe("harness client API: auth, validation, limits, rate limits, routing", () => {
  it("answers 401 to a missing or wrong key, accepts Bearer and raw keys, and 403 to a key without access", async () => {
    await using h = inMemoryHarness({
      apiKey: "main-key",
      endpoints: [{ id: "a" }, { id: "b" }],
      keys: [{ key: "only-a", endpoints: ["a"] }],
    });
    expect(await api(h, "GET", "/v2/a/health", undefined, { key: null })).toMatchObject({
      status: 401,
      body: { error: "missing or wrong API key", status: 401 },
    });
    expect((await api(h, "GET", "/v2/a/health", undefined, { key: "nope" })).status).toBe(401);
    const raw = await send(h, `/v2/a/health`, { headers: { authorization: "main-key" } });
    expect(raw.status).toBe(200);
    expect((await api(h, "GET", "/v2/a/health", undefined, { key: "only-a" })).status).toBe(200);
    expect(await api(h, "GET", "/v2/b/health", undefined, { key: "only-a" })).toMatchObject({
      status: 403,
      body: { error: 'this API key has no access to endpoint "b"', status: 403 },
    });
  });

  it("answers 404 with the JSON error body for an unknown endpoint, job or path", async () => {
    await using h = inMemoryHarness();
    expect(await api(h, "GET", "/v2/nope/health")).toMatchObject({
      status: 404,
      body: { error: 'endpoint "nope" not found', status: 404 },
    });
    expect(await api(h, "GET", "/v2/local/status/nope")).toMatchObject({
      status: 404,
      body: { error: 'job "nope" not found (unknown, or expired)', status: 404 },
    });
    expect(await api(h, "GET", "/elsewhere")).toMatchObject({
      status: 404,
      body: { error: "no route for GET /elsewhere", status: 404 },
    });
    expect(await api(h, "GET", "/v2/local/run")).toMatchObject({
      status: 405,
      body: { error: "/run takes POST, got GET", status: 405 },
    });
  });

  it("refuses malformed bodies, a missing input and out-of-range policy values with 400 naming the field", async () => {
    await using h = inMemoryHarness();
    expect(await api(h, "POST", "/v2/local/run", undefined, { rawBody: "{oops" })).toMatchObject({
      status: 400,
      body: { status: 400, error: expect.stringMatching(/^request body is not JSON: /) },
    });
    expect((await api(h, "POST", "/v2/local/run", { prompt: "x" })).body).toEqual({
      error: "invalid request body: input is required: a JSON object of the handler's parameters",
      status: 400,
      issues: ["input is required: a JSON object of the handler's parameters"],
    });
    expect((await api(h, "POST", "/v2/local/run", { input: "text" })).body).toEqual({
      error: "invalid request body: input must be a JSON object",
      status: 400,
      issues: ["input must be a JSON object"],
    });
    expect(
      (
        await api(h, "POST", "/v2/local/runsync", {
          input: {},
          policy: { ttl: 5_000, executionTimeout: 1_000 },
        })
      ).body,
    ).toEqual({
      error:
        "invalid request body: policy.executionTimeout must be between 5000 and 604800000 ms; policy.ttl must be between 10000 and 604800000 ms",
      status: 400,
      issues: [
        "policy.executionTimeout must be between 5000 and 604800000 ms",
        "policy.ttl must be between 10000 and 604800000 ms",
      ],
    });
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("refuses a body that is not valid UTF-8 with 400 and creates no job", async () => {
    await using h = inMemoryHarness();
    const body = Buffer.concat([Buffer.from('{"input":{"s":"'), Buffer.from([0xc3]), Buffer.from('"}}')]);
    const res = await send(h, `/v2/local/run`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
      body,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "request body is not valid UTF-8", status: 400 });
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("refuses a body over the /run or /runsync limit with 413 naming the limit", async () => {
    await using h = inMemoryHarness({ limits: { runBytes: 1_000, runsyncBytes: 2_000 } });
    const big = { input: { text: "x".repeat(1_500) } };
    expect(await api(h, "POST", "/v2/local/run", big)).toMatchObject({
      status: 413,
      body: { error: "request body is over the /run limit of 1000 bytes", status: 413 },
    });
    const huge = { input: { text: "x".repeat(50_000) } };
    expect(await api(h, "POST", "/v2/local/runsync?wait=1000", huge)).toMatchObject({
      status: 413,
      body: { error: "request body is over the /runsync limit of 2000 bytes", status: 413 },
    });
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("refuses a body over the real 10 MiB /run limit while reading it", async () => {
    await using h = inMemoryHarness();
    // Sent chunked (no content-length), so the limit is enforced while reading.
    const chunk = Buffer.alloc(1_048_576, "x");
    async function* body() {
      yield Buffer.from('{"input":{"t":"');
      for (let i = 0; i < 11; i++) yield chunk;
      yield Buffer.from('"}}');
    }
    const res = await send(h, "/v2/local/run", {
      method: "POST",
      headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
      body: body(),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      error: "request body is over the /run limit of 10485760 bytes",
      status: 413,
    });
  });

  it("answers 429 with Retry-After past the rate per window, and lets requests through in the next window", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      clock,
      rateLimits: { rules: { run: { perWindow: 2, concurrent: null } } },
    });
    expect((await api(h, "POST", "/v2/local/run", { input: {} })).status).toBe(200);
    clock.advance(4_000);
    expect((await api(h, "POST", "/v2/local/run", { input: {} })).status).toBe(200);
    const limited = await api(h, "POST", "/v2/local/run", { input: {} });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      error: "rate limit of /run exceeded: 2 requests per 10000 ms on this endpoint",
      status: 429,
    });
    expect(limited.headers.get("retry-after")).toBe("6");
    // Other operations have their own budget.
    expect((await api(h, "GET", "/v2/local/health")).status).toBe(200);
    clock.advance(6_000);
    expect((await api(h, "POST", "/v2/local/run", { input: {} })).status).toBe(200);
    expect(h.health("local").jobs.inQueue).toBe(3);
  });

  it("answers 429 past the concurrent requests of an operation", async () => {
    await using h = inMemoryHarness({
      rateLimits: { rules: { status: { perWindow: 100, concurrent: 1 } } },
    });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {} })).body as { id: string };
    const held = api(h, "GET", `/v2/local/status-sync/${id}?wait=10000`);
    // Once the held request is in flight, the next one is refused.
    let second = await api(h, "GET", `/v2/local/status/${id}`);
    await expect
      .poll(async () => {
        second = await api(h, "GET", `/v2/local/status/${id}`);
        return second.status;
      })
      .toBe(429);
    expect(second).toMatchObject({
      status: 429,
      body: {
        error: "concurrency limit of /status exceeded: 1 requests at a time on this endpoint",
        status: 429,
      },
    });
    expect(second.headers.get("retry-after")).toBe("1");
    // Cancelling the job ends the held wait at once (it answers the record), freeing the slot.
    expect((await api(h, "POST", `/v2/local/cancel/${id}`)).status).toBe(200);
    expect(await held).toMatchObject({ status: 200, body: { id, status: "CANCELLED" } });
    expect((await api(h, "GET", `/v2/local/status/${id}`)).status).toBe(200);
  });

  it("raises the rate to connected workers × requests per worker", async () => {
    await using h = inMemoryHarness({
      takeTimeoutMs: 200,
      rateLimits: { rules: { run: { perWindow: 1, concurrent: null } }, requestsPerWorker: 2 },
    });
    for (const w of ["w1", "w2"]) {
      await send(h, `/v2/local/ping/${w}`, { headers: { authorization: h.apiKey } });
    }
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await api(h, "POST", "/v2/local/run", { input: {} })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
  });

  it("hands paths outside the job routes to extraRoutes", async () => {
    await using h = inMemoryHarness({
      extraRoutes: (_req, res, url) => {
        if (url.pathname !== "/v2/pods") return false;
        sendJson(res, 200, { pods: [] });
        return true;
      },
    });
    expect(await api(h, "GET", "/v2/pods")).toMatchObject({ status: 200, body: { pods: [] } });
    expect((await api(h, "GET", "/v2/local/health")).status).toBe(200);
    // /v1 is the retired management API (docs/harness.md): 410, not the extra route's or a 404.
    expect((await api(h, "GET", "/v1/other")).status).toBe(410);
  });
});
