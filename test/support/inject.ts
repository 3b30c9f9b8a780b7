import { request } from "node:http";
import type { Socket } from "node:net";
import { Harness, type HarnessOptions } from "../../src/harness/index.js";

/**
 * The harness's routes in memory: {@link inMemoryHarness} makes a harness that binds no port
 * (Harness.inMemory), and {@link send} answers a request through its listener over streams in
 * memory (Harness.connect: node:http on both sides, no socket), returning a WHATWG Response as
 * `fetch` does. For any other harness `send` goes over loopback with `fetch`, so a helper written
 * on `send` serves both; only a test whose subject is the socket needs a listening harness.
 */

const inMemory = new WeakSet<Harness>();

/** A harness without a socket (its `close()` still ends held requests and timers). */
export function inMemoryHarness(options: HarnessOptions = {}): Harness {
  const h = Harness.inMemory(options);
  inMemory.add(h);
  return h;
}

/** What {@link send} takes: fetch's method, headers and a body. */
export interface SendInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
}

/** Statuses whose answer has no body (a Response refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304]);

/** Sends `path` (with its query) to the harness: in memory when it was made so, else over loopback. */
export async function send(h: Harness, path: string, init: SendInit = {}): Promise<Response> {
  if (!inMemory.has(h)) {
    return fetch(`${h.url}${path}`, {
      method: init.method ?? "GET",
      ...(init.headers === undefined ? {} : { headers: init.headers }),
      ...(init.body === undefined ? {} : { body: init.body }),
    });
  }
  const body = init.body === undefined ? undefined : Buffer.from(init.body);
  return new Promise<Response>((resolve, reject) => {
    const req = request(
      `${h.url}${path}`,
      {
        method: init.method ?? "GET",
        headers: {
          ...init.headers,
          ...(body === undefined ? {} : { "content-length": String(body.length) }),
        },
        // A Duplex in memory stands where the TCP socket would.
        createConnection: () => h.connect() as Socket,
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
    req.end(body);
  });
}
