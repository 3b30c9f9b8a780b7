import { getEventListeners, once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { keepsCredential, MAX_REDIRECTS, REDIRECT_STATUSES } from "../../src/http/rules.js";
import { HttpTransport } from "../../src/http/transport.js";
import { loadUndiciClient } from "../../src/http/undici-client.js";
import { nextRetry } from "../../src/retry-policy.js";
import { EMPTY_PAUSE } from "../../src/worker/platform/backoff.js";
import { waitFor } from "../support/wait-for.js";

// Issue 43, item 3: the contract of the worker's one transport (src/http/transport.ts), held by
// both of its clients for answers read whole (node:http, and undici's Pool once warmUp() loaded
// it) and by open() (node:http) for bodies the caller reads. Real servers on 127.0.0.1: node:http
// for well-formed answers, raw TCP where the answer must be malformed or cut.

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  body: string;
  rawHeaders: string[];
  socket: Socket;
}

let server: Server;
let base: string;
/** The same server by another port: another origin of the same host name. */
let other: Server;
let otherBase: string;
const seen: Seen[] = [];
const sockets = new Set<Socket>();

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req);
  const url = new URL(req.url ?? "/", "http://x");
  seen.push({
    method: req.method ?? "",
    url: req.url ?? "",
    authorization: req.headers.authorization,
    body,
    rawHeaders: req.rawHeaders,
    socket: req.socket,
  });
  const to = url.searchParams.get("to");
  const status = Number(url.searchParams.get("status") ?? 0);
  if (url.pathname === "/redirect" && to !== null) {
    res.writeHead(status || 307, { location: to });
    res.end("moved");
  } else if (url.pathname === "/loop") {
    res.writeHead(302, { location: "/loop" });
    res.end();
  } else if (url.pathname === "/latin1") {
    // A header value with a byte above 0x7f, as Latin-1 (node:http writes header strings so).
    res.writeHead(200, { "x-name": "caf\u00e9" });
    res.end("ok");
  } else if (url.pathname === "/limited") {
    res.writeHead(429, { "retry-after": "2" });
    res.end("slow down");
  } else if (url.pathname === "/endless") {
    res.writeHead(200);
    const piece = Buffer.alloc(65_536, "x");
    const pump = (): void => {
      while (!res.destroyed && res.write(piece)) {
        // fill until the socket pushes back
      }
      if (!res.destroyed) res.once("drain", pump);
    };
    pump();
  } else if (url.pathname === "/drip") {
    res.writeHead(200);
    const timer = setInterval(() => res.write("x"), 20);
    res.on("close", () => clearInterval(timer));
  } else if (url.pathname === "/held") {
    // No answer until the client goes away.
  } else {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`${req.method} ${body}`);
  }
}

beforeAll(async () => {
  server = createServer((req, res) => void route(req, res));
  server.keepAliveTimeout = 60_000;
  server.on("connection", (s) => sockets.add(s));
  other = createServer((req, res) => void route(req, res));
  await Promise.all([
    new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)),
    new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve)),
  ]);
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of [server, other]) {
    s?.closeAllConnections();
    await new Promise((resolve) => s?.close(resolve));
  }
});

/** A raw TCP server that answers each connection with `answer` (then does what `after` says). */
async function rawServer(
  answer: (socket: Socket) => void,
): Promise<{ url: string; close: () => Promise<void>; closed: Promise<void> }> {
  let closedResolve!: () => void;
  const closed = new Promise<void>((resolve) => {
    closedResolve = resolve;
  });
  const open = new Set<Socket>();
  const tcp = createTcpServer((socket) => {
    open.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => closedResolve());
    socket.once("data", () => answer(socket));
  });
  tcp.listen(0, "127.0.0.1");
  await once(tcp, "listening");
  return {
    url: `http://127.0.0.1:${(tcp.address() as AddressInfo).port}/raw`,
    closed,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise((resolve) => tcp.close(resolve));
    },
  };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

/**
 * A raw server whose answer's headers trickle: one byte every 20 ms, so no idle timer ever fires,
 * for far longer than any bound a test sets (issue 51, item 9).
 */
function tricklingServer(): ReturnType<typeof rawServer> {
  return rawServer((socket) => {
    socket.write("HTTP/1.1 200 OK\r\nX-Slow: ");
    const timer = setInterval(() => {
      if (!socket.destroyed) socket.write("a");
    }, 20);
    socket.on("close", () => clearInterval(timer));
  });
}

const clients: ReadonlyArray<[string, () => Promise<HttpTransport>]> = [
  ["node:http", async () => new HttpTransport({ credential: "key-1", userAgent: "contract" })],
  [
    "undici (after warmUp)",
    async () => {
      const t = new HttpTransport({
        credential: "key-1",
        userAgent: "contract",
        loadFastClient: loadUndiciClient,
      });
      expect(await t.warmUp()).toBe(true);
      expect(t.client).toBe("undici");
      return t;
    },
  ],
];

describe.each(clients)("answers read whole, through %s", (_name, make) => {
  let t: HttpTransport;
  beforeAll(async () => {
    t = await make();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("keeps the key on a redirect to the same origin, drops it for another port or host", async () => {
    seen.length = 0;
    await t.request("GET", `${base}/redirect?to=${encodeURIComponent("/same")}`);
    await t.request("GET", `${base}/redirect?to=${encodeURIComponent(`${otherBase}/port`)}`);
    await t.request(
      "GET",
      `${base}/redirect?to=${encodeURIComponent(`${base.replace("127.0.0.1", "localhost")}/host`)}`,
    );
    const byPath = (p: string) => seen.find((s) => s.url.startsWith(p));
    expect(byPath("/redirect")?.authorization).toBe("key-1");
    expect(byPath("/same")?.authorization).toBe("key-1");
    expect(byPath("/port")?.authorization).toBeUndefined();
    expect(byPath("/host")?.authorization).toBeUndefined();
  });

  it("sends no key anywhere when it has none", async () => {
    const bare = new HttpTransport({ userAgent: "contract" });
    try {
      seen.length = 0;
      await bare.request("GET", `${base}/redirect?to=${encodeURIComponent("/same")}`);
      expect(seen.map((s) => s.authorization)).toEqual([undefined, undefined]);
    } finally {
      await bare.close();
    }
  });

  it.each([301, 302, 303, 307, 308])("follows a %i keeping the method and the body", async (status) => {
    seen.length = 0;
    const answer = await t.request("POST", `${base}/redirect?status=${status}&to=/landed`, {
      body: '{"output":"é"}',
    });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('POST {"output":"é"}');
    expect(seen.map((s) => [s.method, s.body])).toEqual([
      ["POST", '{"output":"é"}'],
      ["POST", '{"output":"é"}'],
    ]);
  });

  it("ends a redirect loop after its bound with RUNLET_REQUEST_REDIRECTS", async () => {
    seen.length = 0;
    const err = await caught(t.request("GET", `${base}/loop`));
    expect(isRunletError(err) && err.code).toBe("RUNLET_REQUEST_REDIRECTS");
    expect(seen).toHaveLength(MAX_REDIRECTS + 1);
  });

  it("returns a redirect as the answer when asked not to follow", async () => {
    const answer = await t.request("GET", `${base}/redirect?to=/x`, { redirects: "none" });
    expect(answer.status).toBe(307);
    expect(answer.headers["location"]).toBe("/x");
  });

  it("sends and reads Latin-1 header values byte for byte", async () => {
    seen.length = 0;
    const answer = await t.request("GET", `${base}/latin1`, { headers: { "x-job": "caf\u00e9" } });
    expect(answer.headers["x-name"]).toBe("caf\u00e9");
    const raw = seen[0]!.rawHeaders;
    expect(raw[raw.findIndex((h) => h.toLowerCase() === "x-job") + 1]).toBe("caf\u00e9");
  });

  it("refuses a header it cannot carry before sending (RUNLET_REQUEST_REFUSED)", async () => {
    const err = await caught(t.request("GET", `${base}/x`, { headers: { "x-job": "\u20ac" } }));
    expect(isRunletError(err) && err.code).toBe("RUNLET_REQUEST_REFUSED");
  });

  it("fails an answer cut short of its Content-Length with a network error", async () => {
    const raw = await rawServer((socket) =>
      socket.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly part"),
    );
    try {
      const err = await caught(t.request("GET", raw.url));
      expect(isRunletError(err)).toBe(false);
      expect(typeof (err as { code?: unknown }).code).toBe("string");
    } finally {
      await raw.close();
    }
  });

  it("reads an endless body up to its byte bound and an endless drip up to its time bound", async () => {
    const bytes = await t.request("GET", `${base}/endless`, { maxAnswerBytes: 100_000 });
    expect(bytes.status).toBe(200);
    expect(bytes.truncated).toBe("bytes");
    expect(bytes.text.length).toBe(100_000);
    const drip = await t.request("GET", `${base}/drip`, { answerBodyMs: 300 });
    expect(drip.truncated).toBe("time");
    expect(drip.text.length).toBeGreaterThan(0);
  });

  it("fails a request with no answer within answerTimeoutMs", async () => {
    const err = await caught(t.request("GET", `${base}/held`, { answerTimeoutMs: 200 }));
    expect(typeof (err as { code?: unknown }).code).toBe("string");
  });

  it("holds headers that trickle in to a total deadline of answerTimeoutMs, and hangs up", async () => {
    const raw = await tricklingServer();
    try {
      const err = await caught(t.request("GET", raw.url, { answerTimeoutMs: 300 }));
      expect(typeof (err as { code?: unknown }).code).toBe("string");
      expect(isRunletError(err)).toBe(false);
      await raw.closed;
    } finally {
      await raw.close();
    }
  });

  it("cuts a request without an answer when its signal aborts, with the signal's reason", async () => {
    const controller = new AbortController();
    const pending = t.request("GET", `${base}/held`, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("gave up")), 50);
    expect(((await caught(pending)) as Error).message).toBe("gave up");
  });

  it("reads an answer whose headers came before the signal aborted", async () => {
    const controller = new AbortController();
    const answer = await t.request("GET", `${base}/drip`, {
      signal: controller.signal,
      answerBodyMs: 300,
    });
    controller.abort(new Error("late"));
    expect(answer.status).toBe(200);
  });

  it("with abortBody, cuts the body too: the request fails with the signal's reason", async () => {
    const controller = new AbortController();
    const pending = t.request("GET", `${base}/drip`, {
      signal: controller.signal,
      abortBody: true,
      answerBodyMs: 60_000,
    });
    setTimeout(() => controller.abort(new Error("client gave up")), 200);
    expect(((await caught(pending)) as Error).message).toBe("client gave up");
  });

  it("adds one listener to a signal that 50 requests in flight share, and ends them all with it", async () => {
    // Every in-flight post shares the worker's give-up signal: a listener per request would grow
    // with the burst (and a linked signal's would warn past 10).
    const shared = new AbortController();
    seen.length = 0;
    const pending = Array.from({ length: 50 }, () =>
      caught(t.request("GET", `${base}/held`, { signal: shared.signal })),
    );
    for (let i = 0; i < 500 && seen.length < 50; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toHaveLength(50);
    expect(getEventListeners(shared.signal, "abort").length).toBe(1);
    shared.abort(new Error("worker gave up"));
    const errors = await Promise.all(pending);
    expect(errors.map((e) => (e as Error).message)).toEqual(Array(50).fill("worker gave up"));
    expect(getEventListeners(shared.signal, "abort")).toHaveLength(0);
  });

  it("reuses kept connections for requests one after another (20 requests, at most 2 connections)", async () => {
    const fresh = await make();
    try {
      seen.length = 0;
      for (let i = 0; i < 20; i++) await fresh.request("POST", `${base}/echo`, { body: String(i) });
      // Kept and reused, not one per request: node:http keeps one; undici's Pool may open a second
      // while the first one's request is being released, and then alternates the two.
      expect(new Set(seen.map((s) => s.socket)).size).toBeLessThanOrEqual(2);
      expect(seen).toHaveLength(20);
    } finally {
      await fresh.close();
    }
  });

  it("has let go of every connection once close() resolves: the server saw each end, a cut one's too", async () => {
    // A server in the same process (the harness under a test) must see a take the worker cut as
    // gone before the caller goes on; else it hands the next job to it, and the job waits for a
    // heartbeat lapse (test/telemetry/disabled.process.test.ts lost one so, one run in ten).
    const fresh = await make();
    seen.length = 0;
    await fresh.request("POST", `${base}/echo`, { body: "kept" });
    const controller = new AbortController();
    const cut = caught(fresh.request("GET", `${base}/held`, { signal: controller.signal }));
    await waitFor("the held request to arrive", () => seen.length === 2);
    controller.abort(new Error("worker closing"));
    await cut;
    await fresh.close();
    expect(seen.map((s) => s.socket.readableEnded || s.socket.destroyed)).toEqual([true, true]);
  });

  it("hands a 429's Retry-After to the retry policy", async () => {
    const answer = await t.request("GET", `${base}/limited`);
    expect(answer.status).toBe(429);
    expect(answer.headers["retry-after"]).toBe("2");
    expect(nextRetry(EMPTY_PAUSE, 0, { status: answer.status, headers: answer.headers })).toEqual({
      retry: true,
      delayMs: 2_000,
    });
  });
});

describe("bodies the caller reads (open, node:http)", () => {
  const t = new HttpTransport({ credential: "key-1" });
  afterAll(() => t.close());

  it("follows redirects by the same rule", async () => {
    seen.length = 0;
    const opened = await t.open(`${base}/redirect?to=${encodeURIComponent(`${otherBase}/port`)}`);
    opened.body.resume();
    await once(opened.body, "end");
    expect(opened.url).toBe(`${otherBase}/port`);
    expect(seen.map((s) => s.authorization)).toEqual(["key-1", undefined]);
  });

  it.each(["close", "keep-alive"])(
    "delivers every byte when the server closes after the body (%s) while the reader is slow",
    async (connection) => {
      const body = Buffer.alloc(2 * 1024 * 1024, "y");
      const raw = await rawServer((socket) =>
        socket.end(
          Buffer.concat([
            Buffer.from(
              `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n${connection === "close" ? "Connection: close\r\n" : ""}\r\n`,
            ),
            body,
          ]),
        ),
      );
      try {
        const opened = await t.open(raw.url);
        let read = 0;
        for await (const chunk of opened.body) {
          read += (chunk as Buffer).length;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        expect(read).toBe(body.length);
      } finally {
        await raw.close();
      }
    },
  );

  it("holds headers that trickle in to a total deadline of answerTimeoutMs, and hangs up", async () => {
    const raw = await tricklingServer();
    try {
      const err = await caught(t.open(raw.url, { answerTimeoutMs: 300 }));
      expect((err as { code?: unknown }).code).toBe("ETIMEDOUT");
      await raw.closed;
    } finally {
      await raw.close();
    }
  });

  it("fails the body of an answer cut short of its Content-Length", async () => {
    const raw = await rawServer((socket) =>
      socket.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly part"),
    );
    try {
      const opened = await t.open(raw.url);
      const err = await caught(
        (async () => {
          for await (const _ of opened.body) {
            // read to the cut
          }
        })(),
      );
      expect(typeof (err as { code?: unknown }).code).toBe("string");
    } finally {
      await raw.close();
    }
  });

  it("aborts mid-body: the body fails with the signal's reason and the connection closes", async () => {
    const raw = await rawServer((socket) => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
      socket.write(Buffer.alloc(1000, "z"));
    });
    try {
      const controller = new AbortController();
      const opened = await t.open(raw.url, { signal: controller.signal });
      const reading = caught(
        (async () => {
          for await (const _ of opened.body) controller.abort(new Error("job ended"));
        })(),
      );
      expect(((await reading) as Error).message).toBe("job ended");
      await raw.closed;
    } finally {
      await raw.close();
    }
  });
});

describe("the fast client's load", () => {
  it("finds undici's Pool at its own file, the class of undici's public entry", async () => {
    // Where an undici release moves the file, loadUndiciClient falls back to the public entry
    // (slower to load); this says so at the upgrade.
    const own = (await import("undici/lib/dispatcher/pool.js")).default;
    expect(own).toBe((await import("undici")).Pool);
  });

  it("loads that file from the exact undici release package.json pins (no range)", async () => {
    // The file is not a public path of undici's: a caret range would let an install move it.
    const { readFile } = await import("node:fs/promises");
    const manifest = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as {
      dependencies: Record<string, string>;
    };
    const pinned = manifest.dependencies["undici"];
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    const installed = JSON.parse(
      await readFile(new URL("../../node_modules/undici/package.json", import.meta.url), "utf8"),
    ) as { version: string };
    expect(installed.version).toBe(pinned);
  });
});

describe("the redirect rule", () => {
  it("lets the credential go to the same origin or its https upgrade, nowhere else", () => {
    const u = (s: string) => new URL(s);
    expect(keepsCredential(u("http://a.test/x"), u("http://a.test/y"))).toBe(true);
    expect(keepsCredential(u("http://a.test/x"), u("https://a.test/y"))).toBe(true);
    expect(keepsCredential(u("http://a.test/x"), u("https://a.test:443/y"))).toBe(true);
    expect(keepsCredential(u("http://a.test/x"), u("https://a.test:8443/y"))).toBe(false);
    expect(keepsCredential(u("http://a.test:8080/x"), u("http://a.test:8081/y"))).toBe(false);
    expect(keepsCredential(u("https://a.test/x"), u("http://a.test/y"))).toBe(false);
    expect(keepsCredential(u("http://a.test/x"), u("http://b.a.test/y"))).toBe(false);
    expect([...REDIRECT_STATUSES].sort()).toEqual([301, 302, 303, 307, 308]);
  });
});
