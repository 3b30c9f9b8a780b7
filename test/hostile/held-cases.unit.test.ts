import { type IncomingMessage, request } from "node:http";
import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { inMemoryHarness } from "../support/inject.js";
import { send } from "../support/raw-http.js";

// Hostile requests to the routes, in memory: raw requests (raw-http.ts) over the listeners'
// connections (Harness.connect, connectDashboard), which node:http parses as a socket's.

/** A raw request to the API listener, in memory. */
const api = (h: Harness, options: Omit<Parameters<typeof send>[1], "connect">) =>
  send(h.url, { ...options, connect: () => h.connect() });

/** A raw request to the dashboard's listener, in memory. */
const page = (h: Harness, options: Omit<Parameters<typeof send>[1], "connect">) =>
  send(h.url, { ...options, connect: () => h.connectDashboard() });

/** Every route of the harness's main listener, as [method, path]. */
const ROUTES: ReadonlyArray<readonly [string, string]> = [
  ["GET", "/v2/local/job-take/w1"],
  ["GET", "/v2/local/job-take-batch/w1?batch_size=2"],
  ["GET", "/v2/local/job-stop/w1"],
  ["GET", "/v2/local/ping/w1"],
  ["POST", "/v2/local/job-done/w1/j1"],
  ["POST", "/v2/local/job-stream/w1/j1"],
  ["POST", "/v2/local/run"],
  ["POST", "/v2/local/runsync"],
  ["GET", "/v2/local/status/j1"],
  ["GET", "/v2/local/status-sync/j1"],
  ["GET", "/v2/local/stream/j1"],
  ["POST", "/v2/local/cancel/j1"],
  ["POST", "/v2/local/retry/j1"],
  ["POST", "/v2/local/purge-queue"],
  ["GET", "/v2/local/health"],
  ["GET", "/v2/local/requests"],
  ["POST", "/v2/local/openai/v1/chat/completions"],
  ["GET", "/v2/local/openai/v1/models"],
  ["GET", "/v2/serverless"],
  ["POST", "/v2/templates"],
];

describe("what held under hostile callers keeps holding (issue 22)", () => {
  it("refuses a missing, wrong or truncated key on every route with 401, and changes nothing", async () => {
    await using h = inMemoryHarness({ apiKey: "the-main-key-0123", takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    for (const [method, path] of ROUTES) {
      for (const key of [undefined, "wrong", "the-main-key-012", "Bearer the-main-key-012"]) {
        const res = await api(h, {
          method,
          path,
          headers: {
            "content-type": "application/json",
            ...(key === undefined ? {} : { authorization: key }),
          },
          ...(method === "POST" ? { body: '{"input":{}}' } : {}),
        });
        expect({ method, path, key, status: res.status }).toEqual({ method, path, key, status: 401 });
      }
    }
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    expect(h.health("local").jobs).toMatchObject({ inQueue: 1, inProgress: 0, completed: 0 });
  });

  it("serves nothing outside its routes for traversal paths", async () => {
    await using h = inMemoryHarness({ dashboard: true });
    for (const path of [
      "/_runlet/../package.json",
      "/_runlet/%2e%2e/package.json",
      "/_runlet/..%2fpackage.json",
      "/_runlet/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
      "/_runlet/static/../../package.json",
      "/_runlet/..\\package.json",
    ]) {
      const res = await page(h, { path });
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(res.text).not.toContain('"name"');
    }
    const v2 = await api(h, {
      path: "/v2/local/status/..%2F..%2Fpackage.json",
      headers: { authorization: h.apiKey },
    });
    expect(v2.status).toBe(404);
  });

  it("grants no cross-origin access: a preflight gets no Access-Control-Allow-* header", async () => {
    await using h = inMemoryHarness({ dashboard: true });
    for (const [listener, path] of [
      [api, "/v2/local/run"],
      [page, "/_runlet/api/jobs"],
    ] as const) {
      const res = await listener(h, {
        method: "OPTIONS",
        path,
        headers: {
          origin: "https://evil.example",
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization, content-type",
        },
      });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(Object.keys(res.headers).filter((k) => k.startsWith("access-control-"))).toEqual([]);
    }
  });

  it("answers malformed and oversized bodies with a 4xx naming the problem", async () => {
    await using h = inMemoryHarness({ limits: { runBytes: 1_000 } });
    const post = (body: Buffer | string, path = "/v2/local/run") =>
      api(h, {
        method: "POST",
        path,
        headers: { authorization: h.apiKey, "content-type": "application/json" },
        body,
      });
    const cases: Array<[Buffer | string, number, RegExp]> = [
      ["{", 400, /^request body is not JSON: /],
      ["[1,2]", 400, /^request body must be a JSON object/],
      ["", 400, /^request body is empty/],
      [Buffer.from([0x7b, 0xff, 0x7d]), 400, /^request body is not valid UTF-8$/],
      ["x".repeat(1_001), 413, /^request body is over the \/run limit of 1000 bytes$/],
      // Under the byte limit, over the nesting limit: refused by the scan, before JSON.parse builds it.
      ["[".repeat(600), 400, /^request body nests objects and arrays deeper than the limit of 512 levels$/],
    ];
    for (const [body, status, message] of cases) {
      const res = await post(body);
      expect(res.status).toBe(status);
      expect((JSON.parse(res.text) as { error: string }).error).toMatch(message);
    }
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("feeds many event-stream readers at once, each getting the snapshot and the new job", async () => {
    await using h = inMemoryHarness({ dashboard: true });
    const readers = await Promise.all(
      Array.from(
        { length: 25 },
        () =>
          new Promise<IncomingMessage>((resolve, reject) => {
            const req = request(`${h.dashboardUrl}api/events`, {
              headers: { authorization: `Bearer ${h.apiKey}` },
              createConnection: () => h.connectDashboard() as Socket,
            });
            req.on("response", resolve);
            req.on("error", reject);
            req.end();
          }),
      ),
    );
    const id = h.enqueue("local", { input: { n: 1 } });
    await Promise.all(
      readers.map(
        (res) =>
          new Promise<void>((resolve, reject) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => {
              text += c;
              if (text.includes("event: snapshot") && text.includes(`"id":"${id}"`)) resolve();
            });
            res.on("end", () => reject(new Error("the feed ended early")));
          }),
      ),
    );
    for (const res of readers) {
      res.on("error", () => {});
      res.destroy();
    }
  });
});
