import type { Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type Duplex, duplexPair } from "node:stream";
import type { ApiError } from "../../protocol/api.js";

/** Answers with a JSON body. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

/** Answers with the job API's one error body, `{error, status, issues?}`. */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  options: { issues?: readonly string[] | undefined; headers?: Record<string, string> } = {},
): void {
  const body: ApiError = {
    error: message,
    status,
    ...(options.issues === undefined ? {} : { issues: [...options.issues] }),
  };
  sendJson(res, status, body, options.headers);
}

/** Answers with no body (204, or a bare status). */
export function sendEmpty(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, headers);
  res.end();
}

/**
 * An AbortSignal that fires when the client hangs up before the answer is complete: at the
 * connection's end from the client (its FIN, on which node:http already aborts the request), not
 * only at the later 'close' of the response. In between, a held job-take would still take a job
 * and write it to a connection nobody reads, and the job would stay IN_PROGRESS on a worker that
 * had already let go of it.
 */
export function hangUpSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  const socket = res.socket;
  const hungUp = (): void => controller.abort();
  if (socket?.readableEnded) controller.abort();
  else socket?.once("end", hungUp);
  res.once("close", () => {
    // A kept-alive connection serves later requests: its listener goes with this one.
    socket?.off("end", hungUp);
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/**
 * Parses JSON text, or returns the parser's message. V8 quotes a piece of the text in some messages
 * (`Unexpected token 'x', "{"s3Config": x..." is not valid JSON`); that piece is cut, because the
 * message goes into an answer and a body may hold a secret (`s3Config.accessSecret`).
 */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const safe = / is not valid JSON$/.test(message) ? message.replace(/, (?:\.\.\.)?".*$/s, "") : message;
    return { ok: false, message: safe };
  }
}

/** Listens on `host:port` (0 picks a free port) and returns the base URL, `http://<host>:<port>`. */
export async function listen(server: Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return `http://${shown}:${address.port}`;
}

/**
 * A connection to `server` in memory, as a TCP connection would be: node:http parses what is
 * written to the returned stream and answers on it. Either end closed closes the other, as a TCP
 * connection's peer sees a reset or a hang-up (a dropped connection, a client that gave up).
 * The harness's and the dashboard's `connect()`.
 */
export function connectInMemory(server: Server): Duplex {
  const [client, end] = duplexPair();
  client.once("close", () => end.destroy());
  end.once("close", () => client.destroy());
  server.emit("connection", end);
  return client;
}

/** Stops accepting, closes idle connections, and cuts what is still open after `graceMs`. */
export function closeServer(server: Server, graceMs = 200): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    // Held polls were answered before this; anything still open is cut.
    setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
