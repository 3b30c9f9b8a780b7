import { request } from "node:http";
import type { Socket } from "node:net";
import { type Duplex, Readable } from "node:stream";
import { Harness, type HarnessOptions } from "../../src/harness/index.js";

/**
 * The harness's routes in memory: {@link inMemoryHarness} makes a harness that binds no port
 * (Harness.inMemory), and {@link send} answers a request through its listener over streams in
 * memory (Harness.connect: node:http on both sides, no socket), returning a WHATWG Response as
 * `fetch` does. For any other harness `send` goes over loopback with `fetch`, so a helper written
 * on `send` serves both; only a test whose subject is the socket needs a listening harness.
 * {@link sendDashboard} does the same for the dashboard's listener.
 */

const inMemory = new WeakSet<Harness>();

/** A harness without a socket (its `close()` still ends held requests and timers). */
export function inMemoryHarness(options: HarnessOptions = {}): Harness {
  const h = Harness.inMemory(options);
  inMemory.add(h);
  return h;
}

/**
 * What {@link send} takes: fetch's method, headers and a body; a body given as an iterable of
 * pieces is sent chunked (no content-length), as fetch sends a stream.
 */
export interface SendInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer | AsyncIterable<Uint8Array>;
}

/** Statuses whose answer has no body (a Response refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304]);

/** Whether `h` was made by {@link inMemoryHarness}: nothing listens, requests go through `connect`. */
export function isInMemory(h: Harness): boolean {
  return inMemory.has(h);
}

/** Sends `path` (with its query) to the harness: in memory when it was made so, else over loopback. */
export function send(h: Harness, path: string, init: SendInit = {}): Promise<Response> {
  return inMemory.has(h)
    ? viaConnection(() => h.connect(), `${h.url}${path}`, init)
    : viaFetch(`${h.url}${path}`, init);
}

/**
 * Sends `path` (under the page's `/_runlet/`, e.g. `api/state`) to the harness's dashboard: in
 * memory when the harness was made so (Harness.connectDashboard), else over loopback.
 */
export function sendDashboard(h: Harness, path: string, init: SendInit = {}): Promise<Response> {
  const page = h.dashboardUrl;
  if (page === undefined) return Promise.reject(new Error("sendDashboard: the harness has no dashboard"));
  const url = `${page}${path}`;
  return inMemory.has(h) ? viaConnection(() => h.connectDashboard(), url, init) : viaFetch(url, init);
}

function viaFetch(url: string, init: SendInit): Promise<Response> {
  const { body } = init;
  const streamed = body !== undefined && typeof body !== "string" && !Buffer.isBuffer(body);
  return fetch(url, {
    method: init.method ?? "GET",
    ...(init.headers === undefined ? {} : { headers: init.headers }),
    ...(body === undefined
      ? {}
      : { body: streamed ? (Readable.toWeb(Readable.from(body)) as ReadableStream) : body }),
    ...(streamed ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** node:http's client over a connection in memory (the harness's or its dashboard's `connect`). */
function viaConnection(connect: () => Duplex, url: string, init: SendInit): Promise<Response> {
  const { body } = init;
  const whole = typeof body === "string" || Buffer.isBuffer(body) ? Buffer.from(body) : undefined;
  return new Promise<Response>((resolve, reject) => {
    const req = request(
      url,
      {
        method: init.method ?? "GET",
        headers: {
          ...init.headers,
          ...(whole === undefined ? {} : { "content-length": String(whole.length) }),
        },
        // A Duplex in memory stands where the TCP socket would.
        createConnection: () => connect() as Socket,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
          }
          const status = res.statusCode ?? 0;
          resolve(new Response(NULL_BODY.has(status) ? null : Buffer.concat(chunks), { status, headers }));
        });
      },
    );
    req.on("error", reject);
    if (body === undefined || whole !== undefined) req.end(whole);
    // Chunked, as fetch sends a stream; a server that answers and stops reading ends it.
    else Readable.from(body).pipe(req);
  });
}
