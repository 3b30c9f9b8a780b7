import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { headOnly } from "./raw-http.js";

// Issue 42, item 16: request heads the harness and the dashboard must refuse or answer as HTTP
// says, written on a raw socket (node:http and fetch would not send them): a malformed absolute
// target, one naming another host, two Host headers, and HEAD of the page.

/** The status line of a raw request `lines` (CRLF added, the head ended) to `base`. */
function statusOf(base: string, lines: readonly string[]): Promise<string> {
  return headOnly(base, `${lines.join("\r\n")}\r\n\r\n`);
}

describe("request heads (issue 42, item 16)", () => {
  it("answers 400, not 500, to a malformed absolute request target", async () => {
    await using h = await startHarness({});
    const { host } = new URL(h.url);
    expect(
      await statusOf(h.url, [
        "GET http://[bad/v2/local/health HTTP/1.1",
        `Host: ${host}`,
        `Authorization: ${h.apiKey}`,
      ]),
    ).toBe("HTTP/1.1 400 Bad Request");
  });

  it("refuses an absolute target naming another host, and answers one naming its own", async () => {
    await using h = await startHarness({});
    const { host } = new URL(h.url);
    const key = `Authorization: ${h.apiKey}`;
    // The target and the Host header disagree.
    expect(
      await statusOf(h.url, ["GET http://evil.example/v2/local/health HTTP/1.1", `Host: ${host}`, key]),
    ).toBe("HTTP/1.1 400 Bad Request");
    // They agree, on a name this server does not answer to; and with no Host header at all.
    expect(
      await statusOf(h.url, ["GET http://evil.example/v2/local/health HTTP/1.1", "Host: evil.example", key]),
    ).toBe("HTTP/1.1 403 Forbidden");
    expect(await statusOf(h.url, ["GET http://evil.example/v2/local/health HTTP/1.0", key])).toBe(
      "HTTP/1.1 403 Forbidden",
    );
    expect(await statusOf(h.url, [`GET http://${host}/v2/local/health HTTP/1.1`, `Host: ${host}`, key])).toBe(
      "HTTP/1.1 200 OK",
    );
    // A path that starts with // is a path, not a host name: nothing is routed there.
    expect(await statusOf(h.url, ["GET //evil.example/v2/local/health HTTP/1.1", `Host: ${host}`, key])).toBe(
      "HTTP/1.1 404 Not Found",
    );
  });

  it("refuses a request with two Host headers, on the harness and the dashboard", async () => {
    await using h = await startHarness({ dashboard: true });
    for (const [base, path] of [
      [h.url, "/v2/local/health"],
      [new URL(h.dashboardUrl!).origin, "/_runlet/"],
    ] as const) {
      const { host } = new URL(base);
      const head = (hosts: string[]) =>
        statusOf(base, [
          `GET ${path} HTTP/1.1`,
          ...hosts.map((v) => `Host: ${v}`),
          `Authorization: ${h.apiKey}`,
        ]);
      expect(await head([host, "rebind.attacker.example"])).toBe("HTTP/1.1 400 Bad Request");
      expect(await head([host, host])).toBe("HTTP/1.1 400 Bad Request");
      expect(await head([host])).toBe("HTTP/1.1 200 OK");
    }
  });

  it("answers HEAD of the dashboard page as GET, without the body", async () => {
    await using h = await startHarness({ dashboard: true });
    const page = new URL("/_runlet/", h.dashboardUrl!);
    const ask = (method: string) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
        const req = request(page, { method }, (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => {
            body += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        });
        req.on("error", reject);
        req.end();
      });
    const get = await ask("GET");
    const head = await ask("HEAD");
    expect(get.status).toBe(200);
    expect(get.body).toContain("<html");
    expect(head).toEqual({
      status: 200,
      headers: { ...get.headers, date: head.headers["date"] },
      body: "",
    });
    expect(head.headers["content-length"]).toBe(String(Buffer.byteLength(get.body)));
  });
});
