import { once } from "node:events";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** A request the stub received. */
export interface StubRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** What the stub answers: a status, a JSON body (or raw text) and headers. */
export interface StubAnswer {
  readonly status?: number;
  readonly json?: unknown;
  readonly text?: string;
  readonly headers?: Record<string, string>;
  /** Drop the connection without an answer (the client sees a socket error such as ECONNRESET). */
  readonly drop?: boolean;
}

/**
 * A tiny real HTTP server on loopback that stands in for the platform's job API in the client's
 * unit tests: each test scripts its answers. (The harness-backed tests in harness.test.ts check
 * the client against runlet's real harness.)
 */
export async function startStubPlatform(
  answer: (request: StubRequest, index: number) => StubAnswer | Promise<StubAnswer>,
) {
  const requests: StubRequest[] = [];
  const server = createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const url = new URL(req.url ?? "/", "http://stub");
    const request: StubRequest = {
      method: req.method ?? "",
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: Buffer.concat(parts).toString("utf8"),
    };
    requests.push(request);
    const reply = await answer(request, requests.length - 1);
    if (reply.drop === true) {
      req.socket.destroy();
      return;
    }
    const text = reply.text ?? JSON.stringify(reply.json ?? {});
    res.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers });
    res.end(text);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
