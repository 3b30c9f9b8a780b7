import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/index.js";
import { createManagementClient, parseErrorBody, parseRetryAfterMs } from "../../src/management/index.js";
import { rejection, startRecorder } from "../support/management-servers.js";

const API_KEY = "retry-key-secret-42";

const failure = rejection;

describe("management error bodies", () => {
  it("reads a v2 problem's title, detail and errors", () => {
    const body = JSON.stringify({
      title: "Bad Request",
      status: 400,
      detail: "invalid body",
      errors: ["gpu: required", "name: empty"],
    });
    expect(parseErrorBody(400, body)).toEqual({
      title: "Bad Request",
      detail: "invalid body",
      errors: ["gpu: required", "name: empty"],
    });
  });

  it("reads a v1 {message} with the status text as title", () => {
    expect(parseErrorBody(404, '{"message":"template not found"}')).toEqual({
      title: "Not Found",
      detail: "template not found",
      errors: [],
    });
  });

  it("keeps the start of a body that is not JSON", () => {
    expect(parseErrorBody(502, "<html>bad gateway</html>")).toEqual({
      title: "Bad Gateway",
      detail: "<html>bad gateway</html>",
      errors: [],
    });
    expect(parseErrorBody(418, "")).toEqual({ title: "HTTP 418", detail: "", errors: [] });
  });

  it("parses Retry-After as seconds or as an HTTP date", () => {
    expect(parseRetryAfterMs("2", 0)).toBe(2000);
    expect(parseRetryAfterMs("0.05", 0)).toBe(50);
    expect(parseRetryAfterMs(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfterMs("soon", 0)).toBeUndefined();
    expect(parseRetryAfterMs(undefined, 0)).toBeUndefined();
  });

  it("says 403 means the key lacks access, with the problem's detail", async () => {
    await using server = await startRecorder(() => ({
      status: 403,
      headers: { "content-type": "application/problem+json" },
      body: { title: "Forbidden", status: 403, detail: "endpoint e1 belongs to another team" },
    }));
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    const err = await failure(mgmt.serverless.get("e1"));
    expect(err.code).toBe("RUNLET_MANAGEMENT_HTTP");
    expect(err.message).toBe(
      "GET /v2/serverless/e1 answered 403 Forbidden: endpoint e1 belongs to another team — the key has no access to this resource; use a key that does",
    );
  });
});

describe("management 429 back-off", () => {
  it("retries a GET after the Retry-After the server sent", async () => {
    const arrivals: number[] = [];
    await using server = await startRecorder((_r, i) => {
      arrivals.push(performance.now());
      return i === 0
        ? {
            status: 429,
            headers: { "retry-after": "0.2" },
            body: { title: "Too Many Requests", status: 429, detail: "slow down" },
          }
        : { status: 200, body: { templates: [] } };
    });
    // A zero back-off base: without honouring Retry-After the retry would come at once.
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url, retryBaseMs: 0 });
    expect(await mgmt.templates.list()).toEqual([]);
    expect(server.requests.map((r) => r.method)).toEqual(["GET", "GET"]);
    expect(arrivals[1]! - arrivals[0]!).toBeGreaterThanOrEqual(190);
  });

  it("retries DELETE and PATCH but never a POST", async () => {
    await using server = await startRecorder((r, i) =>
      r.method === "POST" || i % 2 === 0
        ? { status: 429, headers: { "retry-after": "0" } }
        : { status: 200, body: { id: "e1", name: "e" } },
    );
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await mgmt.serverless.delete("e1");
    await mgmt.serverless.update("e1", { workers: { max: 1 } });
    const err = await failure(
      mgmt.serverless.create({
        name: "n",
        type: "QUEUE",
        scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
        image: "i:1",
        gpu: { pools: ["ADA_24"] },
      }),
    );
    expect(err.details).toMatchObject({ status: 429, title: "Too Many Requests", retryAfterMs: 0 });
    expect(server.requests.map((r) => r.method)).toEqual(["DELETE", "DELETE", "PATCH", "PATCH", "POST"]);
  });

  it("gives up after maxRetries retries with the last 429", async () => {
    await using server = await startRecorder(() => ({ status: 429, body: { message: "rate limited" } }));
    const mgmt = createManagementClient({
      apiKey: API_KEY,
      baseUrl: server.url,
      maxRetries: 2,
      retryBaseMs: 1,
    });
    const err = await failure(mgmt.pods.list());
    expect(err.details).toMatchObject({ status: 429, detail: "rate limited" });
    expect(server.requests).toHaveLength(3);
  });

  it("fails at once when Retry-After is longer than retryCapMs", async () => {
    await using server = await startRecorder(() => ({ status: 429, headers: { "retry-after": "120" } }));
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url, retryCapMs: 5_000 });
    const err = await failure(mgmt.catalog.gpus());
    expect(err.details).toMatchObject({ status: 429, retryAfterMs: 120_000 });
    expect(server.requests).toHaveLength(1);
  });

  it("stops waiting when the call's signal aborts during a back-off", async () => {
    const controller = new AbortController();
    await using server = await startRecorder(() => {
      setImmediate(() => controller.abort(new Error("shutting down")));
      return { status: 429, headers: { "retry-after": "20" } };
    });
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url });
    await expect(mgmt.templates.list({ signal: controller.signal })).rejects.toThrow("shutting down");
    expect(server.requests).toHaveLength(1);
  });
});

describe("management transport failures and secrecy", () => {
  it("reports a refused connection as RUNLET_MANAGEMENT_NETWORK", async () => {
    const probe = await startRecorder();
    const url = probe.url;
    await probe.close();
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: url });
    const err = await failure(mgmt.templates.list());
    expect(err.code).toBe("RUNLET_MANAGEMENT_NETWORK");
    expect(err.details).toEqual({ method: "GET", path: "/v2/templates", timedOut: false });
  });

  it("reports no answer within timeoutMs as RUNLET_MANAGEMENT_NETWORK", async () => {
    const server = createServer(() => {
      // Never answers.
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const mgmt = createManagementClient({
        apiKey: API_KEY,
        baseUrl: `http://127.0.0.1:${port}`,
        timeoutMs: 150,
      });
      const err = await failure(mgmt.serverless.list());
      expect(err.code).toBe("RUNLET_MANAGEMENT_NETWORK");
      expect(err.message).toBe("GET /v2/serverless got no answer within 150 ms (timeoutMs)");
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("never writes the API key into logs or errors", async () => {
    let logged = "";
    const destination = new Writable({
      write(chunk: Buffer, _enc, callback) {
        logged += chunk.toString("utf8");
        callback();
      },
    });
    const logger = createLogger({ platform: true, level: "debug", destination });
    await using server = await startRecorder((_r, i) =>
      i === 0
        ? { status: 429, headers: { "retry-after": "0" } }
        : { status: 401, body: { message: `bad key ${"x"}` } },
    );
    const mgmt = createManagementClient({ apiKey: API_KEY, baseUrl: server.url, logger });
    const err = await failure(mgmt.templates.get("t1"));
    expect(err.details).toMatchObject({ status: 401 });
    expect(logged).toContain('"path":"/v2/templates/t1"');
    expect(logged).toContain('"status":429');
    for (const text of [logged, err.message, JSON.stringify(err.details), JSON.stringify(err)]) {
      expect(text).not.toContain(API_KEY);
    }
  });

  it("refuses bad options with the option's name", () => {
    expect(() => createManagementClient({ apiKey: "" })).toThrow("apiKey must be a non-empty string");
    expect(() => createManagementClient({ apiKey: "k", baseUrl: "ftp://x" })).toThrow(
      'baseUrl must be an http(s) URL, got "ftp://x"',
    );
    expect(() => createManagementClient({ apiKey: "k", timeoutMs: 0 })).toThrow(
      "timeoutMs must be an integer ≥ 1, got 0",
    );
  });
});
