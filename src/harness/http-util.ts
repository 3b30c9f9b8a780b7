import { isAscii, isUtf8 } from "node:buffer";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ApiError } from "../protocol/api.js";

/** A request body read under a size limit. */
export type BodyResult =
  | { readonly ok: true; readonly text: string }
  | {
      readonly ok: false;
      readonly tooLarge: true;
      readonly limitBytes: number;
      readonly receivedBytes: number;
    }
  /** The bytes are not UTF-8 (decoding would silently turn them into U+FFFD). */
  | { readonly ok: false; readonly tooLarge: false; readonly bytes: Buffer };

/**
 * The text of `bytes`, or undefined when they are not UTF-8 (a decoder would silently turn them
 * into U+FFFD). A leading BOM stays U+FEFF, so JSON.parse then refuses it. Plain ASCII, which every
 * slice of a large string item is, is checked with `isAscii` and copied byte for byte, several
 * times faster than a strict TextDecoder (which also validates, at ~1.6 ms a MiB).
 */
export function decodeUtf8(bytes: Buffer): string | undefined {
  if (isAscii(bytes)) {
    return bytes.length < HEAP_TEXT_BYTES ? bytes.toString("latin1") : ASCII_TO_HEAP.decode(bytes);
  }
  return isUtf8(bytes) ? bytes.toString("utf8") : undefined;
}

/**
 * From about this size Node makes a Latin-1 decode an external string (memory outside V8's heap).
 * A stream item's 1 MiB chunks are kept as the job's stream, and growing external memory makes V8
 * start full collections (about seven per 100 MB item, measured); a decode onto the heap costs a
 * little more per byte but leaves collections to V8's heap limits (three in four such items), and
 * the harness's CPU per 100 MB item fell by about a quarter.
 */
const HEAP_TEXT_BYTES = 1_000_000;
/** Decodes checked ASCII onto V8's heap (not fatal: the bytes are known to be valid). */
const ASCII_TO_HEAP = new TextDecoder("utf-8", { ignoreBOM: true });

/** Beyond the limit, this much more is read and thrown away (so the client can read our answer), then the socket is cut. */
const DISCARD_ALLOWANCE_BYTES = 64 * 1_048_576; // 64 MiB

/**
 * Reads a request body as UTF-8 text, refusing more than `limitBytes`. A declared `content-length`
 * over the limit is refused before reading; otherwise buffering stops at the first byte past the
 * limit and the rest is discarded unread.
 */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<BodyResult> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limitBytes) {
    discard(req, 0);
    return Promise.resolve({ ok: false, tooLarge: true, limitBytes, receivedBytes: declared });
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) {
        cleanup();
        discard(req, received);
        resolve({ ok: false, tooLarge: true, limitBytes, receivedBytes: received });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      const bytes = chunks.length === 1 ? chunks[0]! : gather(chunks, received);
      const text = decodeUtf8(bytes);
      // Not UTF-8: the caller refuses it (400) rather than working on replacement characters.
      // Bytes gathered in the shared scratch buffer are copied out, since the next body reuses it.
      resolve(
        text === undefined ? { ok: false, tooLarge: false, bytes: Buffer.from(bytes) } : { ok: true, text },
      );
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/**
 * Bodies up to this size are joined in one reused buffer before decoding: a large stream item
 * arrives as a hundred 1 MiB bodies, and a fresh buffer each (only to be decoded into a string and
 * dropped) cost page faults and pushed V8 into full collections for external memory.
 */
const SCRATCH_BYTES = 1_048_576 + 65_536; // a stream chunk's limit (1 MiB), with room to spare
let scratch: Buffer | undefined;

/**
 * The pieces of a body as one buffer. Up to {@link SCRATCH_BYTES} it is a view of the shared
 * scratch buffer, valid only until the next call: decode it at once (decoding copies).
 */
function gather(chunks: readonly Buffer[], length: number): Buffer {
  if (length > SCRATCH_BYTES) return Buffer.concat(chunks, length);
  scratch ??= Buffer.allocUnsafe(SCRATCH_BYTES);
  let at = 0;
  for (const chunk of chunks) at += chunk.copy(scratch, at);
  return scratch.subarray(0, length);
}

/** Drains the rest of a refused body without keeping it; past a generous allowance the socket is cut. */
function discard(req: IncomingMessage, alreadyBytes: number): void {
  let dropped = alreadyBytes;
  req.on("data", (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DISCARD_ALLOWANCE_BYTES) req.socket.destroy();
  });
  // An aborted upload is expected here; the answer has been or is being sent.
  req.on("error", () => {});
}

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

/** An AbortSignal that fires when the client hangs up before the answer is complete. */
export function hangUpSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** Query parameters as a plain record (last value wins). */
export function queryOf(url: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of url.searchParams) out[k] = v;
  return out;
}

/** Request headers as a plain record with lower-case names (repeated headers joined with ", "). */
export function headersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
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

/** Stops accepting, closes idle connections, and cuts what is still open after `graceMs`. */
export function closeServer(server: Server, graceMs = 200): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    // Held polls were answered before this; anything still open is cut.
    setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
