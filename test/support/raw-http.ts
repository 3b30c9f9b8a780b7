import { request } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";

/** An answer read whole. */
export interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/**
 * A request through node:http with full control of headers and body (a Buffer, or `bodyBytes` of
 * "x" streamed in 64 KiB pieces): what a hostile caller sends, not what fetch allows. A socket the
 * server cuts after answering resolves with the answer it read. With `connect` (a harness's
 * `connect()` or `connectDashboard()`), the bytes go over that connection in memory instead of a
 * socket to `base`, which then only names the host.
 */
export function send(
  base: string,
  options: {
    readonly method?: string;
    readonly path: string;
    readonly headers?: Record<string, string>;
    readonly body?: Buffer | string;
    readonly bodyBytes?: number;
    readonly connect?: () => Duplex;
  },
): Promise<RawAnswer> {
  const url = new URL(options.path, base);
  const inMemory = options.connect;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: options.method ?? "GET",
        path: options.path,
        headers: options.headers,
        ...(inMemory === undefined ? {} : { createConnection: () => inMemory() as Socket }),
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on("error", reject);
      },
    );
    // The server may answer and cut the upload short: that is the behaviour under test.
    req.on("error", (err) => reject(err));
    if (options.bodyBytes !== undefined) {
      const piece = Buffer.alloc(65_536, "x");
      let left = options.bodyBytes;
      const pump = (): void => {
        while (left > 0) {
          const n = Math.min(left, piece.length);
          left -= n;
          if (!req.write(piece.subarray(0, n))) {
            req.once("drain", pump);
            return;
          }
        }
        req.end();
      };
      pump();
    } else {
      req.end(options.body);
    }
  });
}

/**
 * Sends only a request's head, declaring `contentLength` body bytes it never sends (a slow client),
 * and resolves with the first line of the answer; the socket is then closed. `target` is a base URL
 * (a TCP socket to it) or a function that opens a connection in memory (a harness's `connect()` or
 * `connectDashboard()`), to which the head's bytes are written as they would be to a socket.
 */
export function headOnly(target: string | (() => Duplex), head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let socket: Duplex;
    if (typeof target === "string") {
      const url = new URL(target);
      socket = connect(Number(url.port), url.hostname, () => socket.write(head));
    } else {
      socket = target();
      socket.write(head);
    }
    let got = "";
    socket.setEncoding("utf8");
    socket.on("data", (c: string) => {
      got += c;
      if (got.includes("\r\n")) {
        socket.destroy();
        resolve(got.slice(0, got.indexOf("\r\n")));
      }
    });
    socket.on("error", reject);
  });
}

/** A JSON value nested `depth` levels deep: `{"a":{"a":...0}}`. */
export function nested(depth: number): string {
  return `${'{"a":'.repeat(depth)}0${"}".repeat(depth)}`;
}
