import { describe, expect, it } from "vitest";
import { corsFlag } from "../../src/cli/command.js";
import { startHarness } from "../../src/harness/index.js";

/**
 * A web page under development calling the harness from a browser: no browser runs here, so the
 * test sends what a browser sends (the preflight's OPTIONS with Origin and
 * Access-Control-Request-*, then the request with Origin) over real HTTP and checks the headers a
 * browser would check.
 */

const PAGE = "http://localhost:5173";

function preflight(url: string, origin: string): Promise<Response> {
  return fetch(url, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type,x-stainless-retry-count",
    },
  });
}

describe("CORS on the harness's /v2/ routes", () => {
  it("gives none by default, as the platform documents none: the preflight meets the key check", async () => {
    await using h = await startHarness({ port: 0 });
    const res = await preflight(`${h.url}/v2/local/openai/v1/chat/completions`, PAGE);
    expect(res.status).toBe(401);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("with corsOrigins, answers an allowed page's preflight and marks its answers, errors included", async () => {
    await using h = await startHarness({ port: 0, corsOrigins: [PAGE] });
    const url = `${h.url}/v2/local/openai/v1/chat/completions`;
    const ok = await preflight(url, PAGE);
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe(PAGE);
    expect(ok.headers.get("access-control-allow-methods")).toBe("GET, POST, OPTIONS");
    expect(ok.headers.get("access-control-allow-headers")).toBe(
      "authorization,content-type,x-stainless-retry-count",
    );
    expect(ok.headers.get("vary")).toBe("Origin");
    // Another page gets nothing more than before.
    const other = await preflight(url, "http://evil.example");
    expect(other.status).toBe(401);
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    // The request itself: its answer (here a 401) is readable by the page, request id included.
    const refused = await fetch(url, { method: "POST", headers: { origin: PAGE }, body: "{}" });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe(PAGE);
    expect(refused.headers.get("access-control-expose-headers")).toBe(
      "x-request-id, x-should-retry, retry-after",
    );
    const health = await fetch(`${h.url}/v2/local/health`, {
      headers: { origin: PAGE, authorization: `Bearer ${h.apiKey}` },
    });
    expect(health.status).toBe(200);
    expect(health.headers.get("access-control-allow-origin")).toBe(PAGE);
  });

  it('"*" allows any page', async () => {
    await using h = await startHarness({ port: 0, corsOrigins: ["*"] });
    const res = await preflight(`${h.url}/v2/local/run`, "http://anything.example:3000");
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("http://anything.example:3000");
  });

  it("refuses an origin that is not one, naming it", async () => {
    await expect(startHarness({ port: 0, corsOrigins: ["http://localhost:5173/"] })).rejects.toThrow(
      'corsOrigins must hold origins such as "http://localhost:5173" (scheme, host and port only) or "*", got "http://localhost:5173/"',
    );
    expect(corsFlag("http://localhost:5173, https://app.example")).toEqual([
      "http://localhost:5173",
      "https://app.example",
    ]);
    expect(corsFlag(undefined)).toBeUndefined();
    expect(() => corsFlag("localhost:5173")).toThrow("--cors must be comma-separated origins");
    expect(() => corsFlag(",")).toThrow("--cors needs at least one origin");
  });
});
