import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { headOnly, send } from "../support/raw-http.js";

const MiB = 1_048_576;

describe("the key before the bytes (issue 22, item 1)", () => {
  it("answers a worker post without a key 401 without reading or keeping its body", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    for (const path of [
      "/v2/local/job-done/w1/j1",
      "/v2/nowhere/job-done/w1/j1",
      "/v2/local/job-stream/w1/j1",
    ]) {
      const answer = await send(h.url, {
        method: "POST",
        path,
        headers: { "content-type": "text/plain", "content-length": String(2 * MiB) },
        bodyBytes: 2 * MiB,
      }).catch((err: NodeJS.ErrnoException) => ({
        status: err.code === "EPIPE" || err.code === "ECONNRESET" ? 401 : 0,
      }));
      expect(answer.status).toBe(401);
    }
    const records = h.requests();
    expect(records.map((r) => [r.status, r.body, r.bodyBytes])).toEqual([
      [401, "", 0],
      [401, "", 0],
      [401, "", 0],
    ]);
    expect(h.memory().requestLogBytes).toBeLessThan(3 * 1_024);
  });

  it("answers a slow client without a key at once, without waiting for the body it declared", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const line = await headOnly(
      h.url,
      "POST /v2/local/job-done/w1/j1 HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 20000000\r\n\r\n",
    );
    expect(line).toBe("HTTP/1.1 401 Unauthorized");
  });

  it("lets only a request with the key use up an injected fault", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    h.injectFault("job-take", { status: 503 });
    const stranger = await send(h.url, { path: "/v2/local/job-take/w1" });
    expect(stranger.status).toBe(401);
    const wrongKey = await send(h.url, { path: "/v2/local/job-take/w1", headers: { authorization: "nope" } });
    expect(wrongKey.status).toBe(401);
    const worker = await send(h.url, { path: "/v2/local/job-take/w1", headers: { authorization: h.apiKey } });
    expect(worker.status).toBe(503);
    expect(h.requests({ route: "job-take" }).map((r) => r.status)).toEqual([401, 401, 503]);
  });

  it("refuses a body over its limit by its declared length, before reading it", async () => {
    await using h = await startHarness({ limits: { runBytes: 1_000 } });
    const line = await headOnly(
      h.url,
      `POST /v2/local/run HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${h.apiKey}\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n`,
    );
    expect(line).toBe("HTTP/1.1 413 Payload Too Large");
  });

  it("answers a management call without the key 401 before reading its body", async () => {
    await using h = await startHarness();
    const line = await headOnly(
      h.url,
      "POST /v2/serverless HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 900000\r\n\r\n",
    );
    expect(line).toBe("HTTP/1.1 401 Unauthorized");
  });
});
