import diagnosticsChannel from "node:diagnostics_channel";
import { describe, expect, it } from "vitest";
import { createClient } from "../../src/client/index.js";
import { splitItem } from "../../src/stream/index.js";
import { VERSION } from "../../src/version.js";
import { waitFor } from "../support/wait-for.js";
import { type StubAnswer, startStubPlatform } from "./stub-platform.js";

// These tests use a stub server that stands in for the platform; harness.test.ts runs the client
// against runlet's real harness.

const KEY = "rk_test_key";
const record = (status: string, extra: Record<string, unknown> = {}) => ({ id: "job-1", status, ...extra });

describe("requests the client sends", () => {
  it("posts /run with a Bearer key, runlet's User-Agent and the JSON body, and returns {id, status}", async () => {
    await using stub = await startStubPlatform(() => ({ json: { id: "job-1", status: "IN_QUEUE" } }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("ep-1");
    const body = { input: { prompt: "hi" }, policy: { ttl: 60_000 } };
    expect(await ep.run(body)).toEqual({ id: "job-1", status: "IN_QUEUE" });
    const [req] = stub.requests;
    expect(req?.method).toBe("POST");
    expect(req?.path).toBe("/v2/ep-1/run");
    expect(req?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req?.headers["content-type"]).toBe("application/json");
    expect(req?.headers["user-agent"]).toMatch(new RegExp(`^runlet/${VERSION} `));
    expect(JSON.parse(req?.body ?? "")).toEqual(body);
  });

  it("accepts a baseUrl that already ends in /v2, with or without a trailing slash", async () => {
    await using stub = await startStubPlatform(() => ({ json: record("COMPLETED") }));
    await createClient({ apiKey: KEY, baseUrl: `${stub.url}/v2/` })
      .endpoint("e")
      .status("job-1");
    await createClient({ apiKey: KEY, baseUrl: `${stub.url}/` })
      .endpoint("e")
      .status("job-1");
    expect(stub.requests.map((r) => r.path)).toEqual(["/v2/e/status/job-1", "/v2/e/status/job-1"]);
  });

  it("sends runsync's wait and status's ttl as query parameters", async () => {
    await using stub = await startStubPlatform(() => ({
      json: record("COMPLETED", { output: { n: 1 }, delayTime: 3, executionTime: 9 }),
    }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint<{ a: number }, { n: number }>("e");
    const done = await ep.runsync({ input: { a: 1 } }, { waitMs: 5_000 });
    expect(done).toEqual({
      id: "job-1",
      status: "COMPLETED",
      output: { n: 1 },
      delayTime: 3,
      executionTime: 9,
    });
    await ep.status("job/1", { ttlMs: 20_000 });
    expect(stub.requests.map((r) => [r.method, r.path, r.query])).toEqual([
      ["POST", "/v2/e/runsync", { wait: "5000" }],
      ["GET", "/v2/e/status/job%2F1", { ttl: "20000" }],
    ]);
  });

  it("calls cancel, retry, purge-queue and health on their routes", async () => {
    await using stub = await startStubPlatform((req) => {
      if (req.path.endsWith("/purge-queue")) return { json: { removed: 2, status: "completed" } };
      if (req.path.endsWith("/health")) {
        return {
          json: {
            jobs: { completed: 1, failed: 0, inProgress: 0, inQueue: 2, retried: 0 },
            workers: { idle: 1, running: 0 },
          },
        };
      }
      return { json: { id: "job-1", status: req.path.includes("cancel") ? "CANCELLED" : "IN_QUEUE" } };
    });
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    expect(await ep.cancel("job-1")).toEqual({ id: "job-1", status: "CANCELLED" });
    expect(await ep.retry("job-1")).toEqual({ id: "job-1", status: "IN_QUEUE" });
    expect(await ep.purgeQueue()).toEqual({ removed: 2, status: "completed" });
    expect((await ep.health()).jobs.inQueue).toBe(2);
    expect(stub.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /v2/e/cancel/job-1",
      "POST /v2/e/retry/job-1",
      "POST /v2/e/purge-queue",
      "GET /v2/e/health",
    ]);
  });
});

describe("error answers", () => {
  it("turns an error answer into RUNLET_CLIENT_HTTP with the status, body and message", async () => {
    const body = { error: "input is invalid", status: 400, issues: ["input.prompt: required"] };
    await using stub = await startStubPlatform(() => ({ status: 400, json: body }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const error = await ep.run({ input: {} }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      message: "POST /v2/e/run answered 400: input is invalid (input.prompt: required)",
      details: { status: 400, body },
    });
  });

  it("keeps a non-JSON error body as text in the message and details", async () => {
    await using stub = await startStubPlatform(() => ({ status: 502, text: "<html>bad gateway</html>" }));
    // A 502 on a read is retried; maxRetries: 0 shows the first answer's error.
    const error = await createClient({ apiKey: KEY, baseUrl: stub.url, maxRetries: 0 })
      .endpoint("e")
      .health()
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      message: "GET /v2/e/health answered 502: <html>bad gateway</html>",
      details: { status: 502, body: "<html>bad gateway</html>" },
    });
  });

  it("rejects a 2xx answer of the wrong shape with RUNLET_CLIENT_BAD_RESPONSE", async () => {
    await using stub = await startStubPlatform(() => ({ json: { id: "job-1", status: "DONE" } }));
    const error = await createClient({ apiKey: KEY, baseUrl: stub.url })
      .endpoint("e")
      .status("job-1")
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RUNLET_CLIENT_BAD_RESPONSE", details: { status: 200 } });
    expect((error as Error).message).toMatch(
      /^GET \/v2\/e\/status\/job-1 answered 200 with an unexpected body/,
    );
  });

  it("retries a read answered 429, honouring Retry-After, until it succeeds", async () => {
    await using stub = await startStubPlatform((_req, i) =>
      i < 2
        ? { status: 429, json: { error: "slow down", status: 429 }, headers: { "retry-after": "0" } }
        : { json: record("IN_QUEUE") },
    );
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, retryBaseMs: 60_000 }).endpoint("e");
    // retryBaseMs is a minute: only Retry-After: 0 lets this finish within the test's timeout.
    expect(await ep.status("job-1")).toEqual(record("IN_QUEUE"));
    expect(stub.requests).toHaveLength(3);
  });

  it("never retries a write answered 429", async () => {
    await using stub = await startStubPlatform(() => ({
      status: 429,
      json: { error: "rate limit: 1000 per 10 s", status: 429 },
      headers: { "retry-after": "0" },
    }));
    const error = await createClient({ apiKey: KEY, baseUrl: stub.url })
      .endpoint("e")
      .run({ input: {} })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RUNLET_CLIENT_HTTP", details: { status: 429 } });
    expect(stub.requests).toHaveLength(1);
  });

  it("gives up on a read after maxRetries and reports the 429", async () => {
    await using stub = await startStubPlatform(() => ({
      status: 429,
      json: { error: "slow down", status: 429 },
    }));
    const ep = createClient({
      apiKey: KEY,
      baseUrl: stub.url,
      maxRetries: 2,
      retryBaseMs: 1,
      retryCapMs: 5,
    }).endpoint("e");
    const error = await ep.health().catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      message: "GET /v2/e/health answered 429: slow down",
    });
    expect(stub.requests).toHaveLength(3);
  });

  it("keeps wait() polling through a dropped connection and 502, 503 and 504 answers", async () => {
    const script: Array<(i: number) => StubAnswer> = [
      () => ({ json: record("IN_PROGRESS") }),
      () => ({ drop: true }),
      () => ({ status: 502, text: "<html>bad gateway</html>" }),
      () => ({ status: 503, json: { error: "unavailable", status: 503 } }),
      () => ({ status: 504, text: "gateway timeout" }),
      () => ({ json: record("COMPLETED") }),
    ];
    await using stub = await startStubPlatform((_req, i) => (script[i] ?? script[5]!)(i));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, retryBaseMs: 1, retryCapMs: 5 }).endpoint("e");
    expect(await ep.wait("job-1", { pollIntervalMs: 1 })).toEqual(record("COMPLETED"));
    expect(stub.requests.map((r) => r.path)).toEqual(Array(6).fill("/v2/e/status/job-1"));
  });

  it("retries health on 503 and reports the last answer after maxRetries", async () => {
    await using stub = await startStubPlatform(() => ({ status: 503, json: { error: "down", status: 503 } }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, maxRetries: 2, retryBaseMs: 1 }).endpoint("e");
    expect(await ep.health().catch((e: unknown) => e)).toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      message: "GET /v2/e/health answered 503: down",
    });
    expect(stub.requests).toHaveLength(3);
  });

  it("never repeats a write after a 503 or a dropped connection", async () => {
    await using stub = await startStubPlatform((_req, i) =>
      i === 0 ? { status: 503, json: { error: "unavailable", status: 503 } } : { drop: true },
    );
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, retryBaseMs: 1 }).endpoint("e");
    expect(await ep.run({ input: {} }).catch((e: unknown) => e)).toMatchObject({
      code: "RUNLET_CLIENT_HTTP",
      details: { status: 503 },
    });
    expect(await ep.cancel("job-1").catch((e: unknown) => e)).toBeInstanceOf(Error);
    expect(stub.requests.map((r) => r.path)).toEqual(["/v2/e/run", "/v2/e/cancel/job-1"]);
  });

  it("does not repeat a stream read that may have served chunks (502, dropped connection), but does repeat a 429", async () => {
    await using stub = await startStubPlatform((_req, i) =>
      i === 0
        ? { status: 429, json: { error: "slow down", status: 429 }, headers: { "retry-after": "0" } }
        : i === 1
          ? { status: 502, text: "bad gateway" }
          : { drop: true },
    );
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, retryBaseMs: 1 }).endpoint("e");
    const first = await (async () => {
      for await (const _ of ep.streamChunks("job-1")) {
        // nothing arrives before the 502
      }
    })().catch((e: unknown) => e);
    expect(first).toMatchObject({ code: "RUNLET_CLIENT_HTTP", details: { status: 502 } });
    expect(stub.requests).toHaveLength(2);
    const second = await (async () => {
      for await (const _ of ep.streamChunks("job-1")) {
        // the connection drops before any chunk
      }
    })().catch((e: unknown) => e);
    expect(second).toBeInstanceOf(Error);
    expect(stub.requests.map((r) => r.path)).toEqual(Array(3).fill("/v2/e/stream/job-1"));
  });

  it("aborts a 429 back-off as soon as the signal aborts", async () => {
    await using stub = await startStubPlatform(() => ({
      status: 429,
      json: { error: "x", status: 429 },
      headers: { "retry-after": "3600" },
    }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url, retryCapMs: 3_600_000 }).endpoint("e");
    const controller = new AbortController();
    const pending = ep.status("job-1", { signal: controller.signal }).catch((e: unknown) => e);
    await waitFor("the stub to receive the request", () => stub.requests.length > 0);
    controller.abort(new Error("caller gave up"));
    expect(await pending).toMatchObject({ message: "caller gave up" });
  });

  it("fails fast on bad options, naming the option", () => {
    expect(() => createClient({ apiKey: "", baseUrl: "http://x" })).toThrow(
      /apiKey must be a non-empty string/,
    );
    expect(() => createClient({ apiKey: KEY, baseUrl: "nope" })).toThrow(
      /baseUrl must be an absolute http\(s\) URL, got "nope"/,
    );
    expect(() => createClient({ apiKey: KEY, baseUrl: "http://x", maxRetries: -1 })).toThrow(
      "maxRetries must be an integer ≥ 0, got -1",
    );
  });
});

describe("wait", () => {
  it("polls /status until the job is terminal and returns the final record", async () => {
    const states = ["IN_QUEUE", "IN_PROGRESS", "IN_PROGRESS", "FAILED"];
    await using stub = await startStubPlatform((_r, i) => ({
      json: record(states[Math.min(i, 3)]!, i >= 3 ? { error: "boom" } : {}),
    }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    expect(await ep.wait("job-1", { pollIntervalMs: 1 })).toEqual(record("FAILED", { error: "boom" }));
    expect(stub.requests).toHaveLength(4);
  });

  it("throws RUNLET_CLIENT_TIMEOUT with the last status when the job does not finish in time", async () => {
    await using stub = await startStubPlatform(() => ({ json: record("IN_PROGRESS") }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const error = await ep.wait("job-1", { timeoutMs: 150, pollIntervalMs: 10 }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_TIMEOUT",
      details: { id: "job-1", status: "IN_PROGRESS", timeoutMs: 150 },
    });
  });

  it("rejects with the caller's reason when the caller aborts", async () => {
    await using stub = await startStubPlatform(() => ({ json: record("IN_QUEUE") }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const controller = new AbortController();
    const pending = ep
      .wait("job-1", { pollIntervalMs: 60_000, signal: controller.signal })
      .catch((e: unknown) => e);
    await waitFor("the stub to receive the request", () => stub.requests.length > 0);
    controller.abort(new Error("stop waiting"));
    expect(await pending).toMatchObject({ message: "stop waiting" });
  });
});

describe("stream", () => {
  /** Chunks of three items — a short string, a split string, split bytes — as a worker posts them. */
  function postedChunks() {
    const long = 'é😀"x'.repeat(400);
    const bytes = Buffer.from(Array.from({ length: 900 }, (_, i) => i % 256));
    const chunks = [
      ...splitItem("first", 0),
      ...splitItem(long, 1, { tokens: 7 }, 500),
      ...splitItem(bytes, 2, {}, 400),
    ];
    return { long, bytes, chunks: JSON.parse(JSON.stringify(chunks)) as unknown[] };
  }

  it("yields the original values, reassembled across reads, until a terminal answer with nothing left", async () => {
    const { long, bytes, chunks } = postedChunks();
    expect(chunks.length).toBeGreaterThan(6);
    // Serve chunks two per read (the third read is empty: the job is still running), then COMPLETED.
    const reads = [chunks.slice(0, 2), [], chunks.slice(2, 4), chunks.slice(4)];
    await using stub = await startStubPlatform((_r, i) => ({
      json:
        i < reads.length
          ? { status: i === 3 ? "COMPLETED" : "IN_PROGRESS", stream: reads[i] }
          : { status: "COMPLETED", stream: [] },
    }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const values: unknown[] = [];
    for await (const value of ep.stream("job-1", { pollIntervalMs: 1 })) values.push(value);
    expect(values).toHaveLength(3);
    expect(values[0]).toBe("first");
    expect(values[1]).toBe(long);
    expect(Buffer.compare(values[2] as Buffer, bytes)).toBe(0);
    expect(stub.requests.map((r) => r.path)).toEqual(Array(5).fill("/v2/e/stream/job-1"));
  });

  it("starts stream reads at least readIntervalMs apart while chunks keep coming, so one read carries many", async () => {
    // When the client creates each request (undici's own diagnostics channel), not when the stub
    // sees it: on a loaded machine a request can reach the server late and shrink the next gap.
    const starts: number[] = [];
    const onCreate = (message: unknown) => {
      const path = (message as { request?: { path?: unknown } }).request?.path;
      if (typeof path === "string" && path.startsWith("/v2/e/stream/")) starts.push(performance.now());
    };
    diagnosticsChannel.subscribe("undici:request:create", onCreate);
    await using stub = await startStubPlatform((_req, i) => {
      // Four answers with a chunk each, the fourth terminal; the fifth read finds nothing left.
      const stream = i < 4 ? splitItem(`t${i}`, i) : [];
      return { json: { status: i >= 3 ? "COMPLETED" : "IN_PROGRESS", stream } };
    });
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const values: unknown[] = [];
    try {
      for await (const value of ep.stream("job-1", { readIntervalMs: 200 })) values.push(value);
    } finally {
      diagnosticsChannel.unsubscribe("undici:request:create", onCreate);
    }
    expect(values).toEqual(["t0", "t1", "t2", "t3"]);
    expect(stub.requests.map((r) => r.path)).toEqual(Array(5).fill("/v2/e/stream/job-1"));
    expect(starts).toHaveLength(5);
    // A lower bound the client's own pause guarantees (a slow machine only widens the gaps); read
    // again at once after each answer, the gaps would be about a millisecond.
    const gaps = starts.slice(1).map((at, i) => at - starts[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(150);
  });

  it("delivers every streamed value, then throws the job's error when it FAILED", async () => {
    const report = JSON.stringify({ error_type: "Error", error_message: "GPU on fire", error_traceback: "" });
    await using stub = await startStubPlatform((req, i) => {
      if (req.path.includes("/status/")) return { json: record("FAILED", { error: report }) };
      const stream = i === 0 ? [...splitItem("a", 0), ...splitItem("b", 1)] : [];
      return { json: { status: i === 0 ? "IN_PROGRESS" : "FAILED", stream } };
    });
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const values: unknown[] = [];
    const error = await (async () => {
      for await (const value of ep.stream("job-1", { pollIntervalMs: 1 })) values.push(value);
    })().catch((e: unknown) => e);
    expect(values).toEqual(["a", "b"]);
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_JOB_FAILED",
      message: "job job-1 ended FAILED: GPU on fire",
      details: { id: "job-1", status: "FAILED", error: report },
    });
  });

  it("gives raw chunks with their metrics from streamChunks", async () => {
    const chunks = splitItem("x".repeat(1_000), 0, { tokens: 3 }, 400);
    await using stub = await startStubPlatform((_r, i) => ({
      json: { status: "COMPLETED", stream: i === 0 ? chunks : [] },
    }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const got = [];
    for await (const chunk of ep.streamChunks("job-1")) got.push(chunk);
    expect(got).toEqual(chunks);
    // The terminal answer still carried chunks, so the client read once more to be sure nothing was left.
    expect(stub.requests).toHaveLength(2);
    expect(got[0]?.metrics).toMatchObject({
      streamIndex: 0,
      part: 0,
      parts: 4,
      encoding: "string",
      tokens: 3,
    });
  });

  it("stops polling as soon as the signal aborts", async () => {
    await using stub = await startStubPlatform(() => ({ json: { status: "IN_PROGRESS", stream: [] } }));
    const ep = createClient({ apiKey: KEY, baseUrl: stub.url }).endpoint("e");
    const controller = new AbortController();
    const reading = (async () => {
      for await (const _ of ep.stream("job-1", { pollIntervalMs: 60_000, signal: controller.signal })) {
        // nothing streams
      }
    })().catch((e: unknown) => e);
    await waitFor("the stub to receive the request", () => stub.requests.length > 0);
    controller.abort(new Error("reader left"));
    expect(await reading).toMatchObject({ message: "reader left" });
    expect(stub.requests).toHaveLength(1);
  });
});
