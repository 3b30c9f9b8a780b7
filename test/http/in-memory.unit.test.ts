import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { connectInMemory } from "../../src/harness/http/http-util.js";
import { HttpTransport } from "../../src/http/transport.js";

// The transport's `connect` option (src/http/in-memory.ts): node:http's client over stream pairs
// into a node:http server that never listens. In the unit lane, whose guard makes listen and
// connect throw: a request that reached for a socket would fail here.

/** A node:http server fed connections in memory; `route` answers each request. */
function serverInMemory(route: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(route);
  let connections = 0;
  const closed: Array<Promise<unknown>> = [];
  const transport = (extra: { loadFastClient?: () => never } = {}) =>
    new HttpTransport({
      credential: "secret-key",
      connect: () => {
        connections++;
        const end = connectInMemory(server);
        // Not events.once: a connection the client cut with an error emits `error` before `close`.
        closed.push(new Promise((resolve) => end.once("close", resolve)));
        return end;
      },
      ...extra,
    });
  return { server, transport, connections: () => connections, closed: () => Promise.all(closed) };
}

describe("the transport over connections in memory", () => {
  it("sends requests and reads answers whole, one connection each, the credential and body carried", async () => {
    const seen: Array<{ url: string; auth: string | undefined; body: string }> = [];
    const rig = serverInMemory((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        seen.push({ url: req.url ?? "", auth: req.headers.authorization, body });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ echo: body }));
      });
    });
    const http = rig.transport();
    const a = await http.request("POST", "http://localhost/v2/x/job-done/w/j1?gpu=L", { body: "one" });
    const b = await http.request("POST", "http://localhost/v2/x/job-done/w/j2?gpu=L", { body: "two" });
    expect([a.status, a.text, b.text]).toEqual([200, '{"echo":"one"}', '{"echo":"two"}']);
    expect(seen).toEqual([
      { url: "/v2/x/job-done/w/j1?gpu=L", auth: "secret-key", body: "one" },
      { url: "/v2/x/job-done/w/j2?gpu=L", auth: "secret-key", body: "two" },
    ]);
    expect(rig.connections()).toBe(2);
    await http.close();
    // Each connection ended with its answer (no keep-alive in memory) or at close.
    await rig.closed();
  });

  it("follows a redirect in memory and streams a body the caller reads (open)", async () => {
    const rig = serverInMemory((req, res) => {
      if (req.url === "/old") {
        res.writeHead(302, { location: "/new" });
        res.end();
        return;
      }
      res.write("part one, ");
      setImmediate(() => res.end("part two"));
    });
    const http = rig.transport();
    const opened = await http.open("http://localhost/old");
    let text = "";
    for await (const chunk of opened.body) text += (chunk as Buffer).toString();
    expect([opened.status, opened.url, text]).toEqual([200, "http://localhost/new", "part one, part two"]);
    await http.close();
  });

  it("cuts a request whose answer does not come within answerTimeoutMs, as a socket's idle timeout does", async () => {
    const held: ServerResponse[] = [];
    const rig = serverInMemory((_req, res) => held.push(res));
    const http = rig.transport();
    const err = await http.request("GET", "http://localhost/slow", { answerTimeoutMs: 50 }).then(
      () => undefined,
      (e: unknown) => e as NodeJS.ErrnoException,
    );
    expect(err?.code).toBe("ETIMEDOUT");
    expect(err?.message).toMatch(/within 50 ms/);
    await rig.closed();
    await http.close();
  });

  it("cuts a body that stalls after its headers: the connection's idle timer fires", async () => {
    const rig = serverInMemory((_req, res) => {
      res.writeHead(200);
      res.write("first byte, then nothing");
    });
    const http = rig.transport();
    const opened = await http.open("http://localhost/stall", { answerTimeoutMs: 50 });
    const err = await (async () => {
      for await (const _chunk of opened.body) {
        // read on until the idle timer cuts the body
      }
    })().then(
      () => undefined,
      (e: unknown) => e as NodeJS.ErrnoException,
    );
    expect(err?.code).toBe("ETIMEDOUT");
    expect(err?.message).toMatch(/no byte of the answer to the GET for 50 ms/);
    await http.close();
  });

  it("keeps a slow answer whose bytes keep coming: the idle timer restarts with each byte", async () => {
    const rig = serverInMemory((_req, res) => {
      res.writeHead(200);
      let sent = 0;
      const tick = setInterval(() => {
        res.write("x");
        if (++sent === 6) {
          clearInterval(tick);
          res.end();
        }
      }, 30);
    });
    const http = rig.transport();
    // 6 bytes 30 ms apart take ~180 ms, longer than the 100 ms idle bound between bytes.
    const answer = await http.request("GET", "http://localhost/drip", { answerTimeoutMs: 100 });
    expect([answer.status, answer.text]).toEqual([200, "xxxxxx"]);
    await http.close();
  });

  it("close() ends a request still held, and the server reads the hang-up", async () => {
    const held: IncomingMessage[] = [];
    const rig = serverInMemory((req) => held.push(req));
    const http = rig.transport();
    const pending = http.request("GET", "http://localhost/take").then(
      () => "answered",
      () => "cut",
    );
    while (held.length === 0) await new Promise(setImmediate);
    const hungUp = once(held[0]!.socket, "close");
    await http.close();
    await hungUp;
    expect(await pending).toBe("cut");
  });

  it("never loads the fast client: every request stays on node:http in memory", async () => {
    const rig = serverInMemory((_req, res) => res.end("ok"));
    const http = rig.transport({
      loadFastClient: () => {
        throw new Error("undici would open sockets of its own");
      },
    });
    expect(await http.warmUp()).toBe(false);
    expect(http.client).toBe("node:http");
    expect((await http.request("GET", "http://localhost/")).text).toBe("ok");
    await http.close();
  });
});
