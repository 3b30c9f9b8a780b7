import { isAscii, isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import { parseJson } from "./http-util.js";
import { exceedsJsonDepth } from "./json-depth.js";

/** What a body parser returns: the value, or the parser's message (never quoting the body). */
export type JsonParse = { ok: true; value: unknown } | { ok: false; message: string };

/** How {@link readJson} reads one body; the router passes a route's own (docs/harness.md, "Limits and rate limits"). */
export interface ReadJsonOptions {
  /** Most bytes read; a declared `content-length` over it is refused unread, and reading stops at the first byte past it. */
  readonly limitBytes: number;
  /** Most levels of objects and arrays the JSON may nest, checked on the text before it is parsed. */
  readonly maxDepth: number;
  /** What the messages call the body: `"request body"`, `"job-done body"`. */
  readonly subject: string;
  /** Names the limit in the message: `"/run"` gives "over the /run limit of N bytes". */
  readonly limitName?: string;
  /** The status of a body over the limit. @default 413 */
  readonly tooLargeStatus?: 400 | 413;
  /** Media types taken (lower case, without parameters); any other is refused with 400. @default any */
  readonly types?: ReadonlySet<string>;
  /** `"text"`: checked as UTF-8 only, not parsed (bodies of GET routes). @default "json" */
  readonly kind?: "json" | "text";
  /** An empty (or blank) body gives `value: undefined` instead of a 400. @default false */
  readonly allowEmpty?: boolean;
  /** The JSON parser (the job-stream fast path); its result must be JSON.parse's. @default parseJson */
  readonly parse?: (text: string) => JsonParse;
  /**
   * The body must be a JSON object: an empty one is refused with `emptyMessage`, any other value
   * with "<subject> must be a JSON object" (400). @default any JSON value
   */
  readonly object?: { readonly emptyMessage: string };
}

/** A body read by {@link readJson}. `text` is what was kept of it ("" when it was too large). */
export type JsonRead =
  | { readonly ok: true; readonly text: string; readonly value: unknown; readonly bytes: number }
  | {
      readonly ok: false;
      readonly status: 400 | 413;
      readonly message: string;
      readonly text: string;
      readonly bytes: number;
    };

/**
 * Reads a request body under a byte limit and parses it as JSON under a nesting limit: the one
 * body reader of every route family (client, worker, OpenAI, management, dashboard). The router
 * calls it only after the key, endpoint and method checks have passed.
 *
 * @example
 * const body = await readJson(req, { limitBytes: 1_048_576, maxDepth: 512, subject: "request body" });
 * if (!body.ok) return sendError(res, body.status, body.message);
 */
export async function readJson(req: IncomingMessage, options: ReadJsonOptions): Promise<JsonRead> {
  const { subject } = options;
  const read = await readBody(req, options.limitBytes);
  const fail = (status: 400 | 413, message: string, text = "", bytes = 0): JsonRead => ({
    ok: false,
    status,
    message,
    text,
    bytes,
  });
  if (!read.ok && read.tooLarge) {
    const name = options.limitName === undefined ? "" : `${options.limitName} `;
    return fail(
      options.tooLargeStatus ?? 413,
      `${subject} is over the ${name}limit of ${read.limitBytes} bytes`,
      "",
      read.receivedBytes,
    );
  }
  if (!read.ok) {
    // Kept as far as it decodes (for the request log), refused rather than worked on.
    return fail(400, `${subject} is not valid UTF-8`, read.bytes.toString("utf8"), read.bytes.length);
  }
  return parseBodyText(read.text, read.receivedBytes, options, req.headers["content-type"]);
}

/**
 * Checks and parses a body's text under `options` (media type, nesting, JSON, an object when
 * asked): what {@link readJson} does once the bytes are in, for callers that hold the text already
 * (the pure management API).
 */
export function parseBodyText(
  text: string,
  bytes: number,
  options: ReadJsonOptions,
  contentType: string | undefined,
): JsonRead {
  const { subject } = options;
  const fail = (message: string): JsonRead => ({ ok: false, status: 400, message, text, bytes });
  // A type sent exactly as listed (what clients send) needs no splitting and lower-casing.
  if (options.types !== undefined && !(contentType !== undefined && options.types.has(contentType))) {
    const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
    if (!options.types.has(type)) {
      const taken = [...options.types].join(" or ");
      return fail(`${subject.split(" ")[0]} takes a JSON body as ${taken}, got "${type}"`);
    }
  }
  if (options.kind === "text") return { ok: true, text, value: undefined, bytes };
  // Only these two options care about a blank body; trim() would copy every body's text.
  if ((options.object !== undefined || options.allowEmpty === true) && text.trim() === "") {
    if (options.object !== undefined) return fail(options.object.emptyMessage);
    if (options.allowEmpty === true) return { ok: true, text, value: undefined, bytes };
  }
  if (exceedsJsonDepth(text, options.maxDepth)) {
    return fail(`${subject} nests objects and arrays deeper than the limit of ${options.maxDepth} levels`);
  }
  const parsed = (options.parse ?? parseJson)(text);
  if (!parsed.ok) return fail(`${subject} is not JSON: ${parsed.message}`);
  const value = parsed.value;
  if (options.object !== undefined && (typeof value !== "object" || value === null || Array.isArray(value))) {
    return fail(`${subject} must be a JSON object`);
  }
  return { ok: true, text, value, bytes };
}

/** A request body read under a size limit. */
type BodyResult =
  | { readonly ok: true; readonly text: string; readonly receivedBytes: number }
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
function decodeUtf8(bytes: Buffer): string | undefined {
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
function readBody(req: IncomingMessage, limitBytes: number): Promise<BodyResult> {
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
        text === undefined
          ? { ok: false, tooLarge: false, bytes: Buffer.from(bytes) }
          : { ok: true, text, receivedBytes: received },
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

/**
 * Leaves a refused request's body unread: whatever comes is dropped as it arrives, never kept, and
 * past a generous allowance the socket is cut (the router calls it for every refused request).
 */
export function dropBody(req: IncomingMessage): void {
  if (req.complete || req.readableEnded) return;
  discard(req, 0);
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
