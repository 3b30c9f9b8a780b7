import type { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { inMemoryHarness } from "../support/inject.js";
import { headOnly, send } from "../support/raw-http.js";

// Issue 42, item 16: request heads the harness and the dashboard must refuse or answer as HTTP
// says, written as raw bytes (node:http and fetch would not send them): a malformed absolute
// target, one naming another host, two Host headers, and HEAD of the page. The bytes go to the
// listeners' connections in memory (Harness.connect, connectDashboard), which node:http's server
// parses as it parses a socket's; no port is bound. The Host the harness answers to here is
// `localhost` (its url), with any port.

/** The status line of a raw request `lines` (CRLF added, the head ended) on a new connection. */
function statusOf(connect: () => Duplex, lines: readonly string[]): Promise<string> {
  return headOnly(connect, `${lines.join("\r\n")}\r\n\r\n`);
}

const host = "localhost:8000";

describe("request heads (issue 42, item 16)", () => {
  it("answers 400, not 500, to a malformed absolute request target", async () => {
    await using h = inMemoryHarness({});
    expect(
      await statusOf(
        () => h.connect(),
        ["GET http://[bad/v2/local/health HTTP/1.1", `Host: ${host}`, `Authorization: ${h.apiKey}`],
      ),
    ).toBe("HTTP/1.1 400 Bad Request");
  });

  it("refuses an absolute target naming another host, and answers one naming its own", async () => {
    await using h = inMemoryHarness({});
    const key = `Authorization: ${h.apiKey}`;
    const api = () => h.connect();
    // The target and the Host header disagree.
    expect(
      await statusOf(api, ["GET http://evil.example/v2/local/health HTTP/1.1", `Host: ${host}`, key]),
    ).toBe("HTTP/1.1 400 Bad Request");
    // They agree, on a name this server does not answer to; and with no Host header at all.
    expect(
      await statusOf(api, ["GET http://evil.example/v2/local/health HTTP/1.1", "Host: evil.example", key]),
    ).toBe("HTTP/1.1 403 Forbidden");
    expect(await statusOf(api, ["GET http://evil.example/v2/local/health HTTP/1.0", key])).toBe(
      "HTTP/1.1 403 Forbidden",
    );
    expect(await statusOf(api, [`GET http://${host}/v2/local/health HTTP/1.1`, `Host: ${host}`, key])).toBe(
      "HTTP/1.1 200 OK",
    );
    // A path that starts with // is a path, not a host name: nothing is routed there.
    expect(await statusOf(api, ["GET //evil.example/v2/local/health HTTP/1.1", `Host: ${host}`, key])).toBe(
      "HTTP/1.1 404 Not Found",
    );
  });

  it("refuses a request with two Host headers, on the harness and the dashboard", async () => {
    await using h = inMemoryHarness({ dashboard: true });
    for (const [connect, path] of [
      [() => h.connect(), "/v2/local/health"],
      [() => h.connectDashboard(), "/_runlet/"],
    ] as const) {
      const head = (hosts: string[]) =>
        statusOf(connect, [
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
    await using h = inMemoryHarness({ dashboard: true });
    const ask = async (method: string) => {
      const { status, headers, text } = await send(h.dashboardUrl!, {
        method,
        path: "/_runlet/",
        connect: () => h.connectDashboard(),
      });
      return { status, headers, body: text };
    };
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
