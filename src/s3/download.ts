import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { isIP } from "node:net";
import { type Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { isRunletError, RunletError } from "../errors.js";
import { HttpTransport } from "../http/transport.js";
import { settle } from "../task-sink.js";
import { USER_AGENT } from "../version.js";
import { guardedLookup, isPrivateAddress, refusedError } from "./private-address.js";

/** A body being downloaded: its bytes and, when the source said, its length. */
export interface Source {
  readonly stream: Readable;
  readonly contentLength: number | undefined;
  /** What to call it in messages and the temporary file's name. */
  readonly name: string;
}

function tooLarge(name: string, maxBytes: number, seen: number): RunletError {
  return new RunletError(
    "RUNLET_S3_DOWNLOAD_TOO_LARGE",
    `download of ${name} is larger than its cap of ${maxBytes} bytes (${seen} bytes${
      seen > maxBytes ? " announced or read" : ""
    }): raise maxBytes`,
    { details: { name, maxBytes, bytes: seen } },
  );
}

/** A pass-through that fails once more than `maxBytes` went through: the cap holds even when the length was not announced. */
function capped(name: string, maxBytes: number): Transform & { bytes: () => number } {
  let total = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      total += chunk.length;
      if (total > maxBytes) callback(tooLarge(name, maxBytes, total));
      else callback(null, chunk);
    },
  });
  return Object.assign(t, { bytes: () => total });
}

/** Refuses a body whose announced length is over the cap before reading any of it. */
function checkAnnounced(source: Source, maxBytes: number): void {
  if (source.contentLength !== undefined && source.contentLength > maxBytes) {
    // Destroying an unread HTTP body emits an abort error; nobody else is listening for it.
    source.stream.on("error", () => undefined);
    source.stream.destroy();
    throw tooLarge(source.name, maxBytes, source.contentLength);
  }
}

/** Writes a source to `path` under the cap; a partial file is removed on failure. */
export async function toFile(
  source: Source,
  path: string,
  maxBytes: number,
  signal: AbortSignal,
): Promise<{ path: string; bytes: number }> {
  checkAnnounced(source, maxBytes);
  const cap = capped(source.name, maxBytes);
  try {
    await pipeline(source.stream, cap, createWriteStream(path), { signal });
  } catch (err) {
    await rm(path, { force: true });
    throw err;
  }
  return { path, bytes: cap.bytes() };
}

/** Returns the source as a stream that errors with RUNLET_S3_DOWNLOAD_TOO_LARGE past the cap. */
export function toStream(source: Source, maxBytes: number, signal: AbortSignal): { stream: Readable } {
  checkAnnounced(source, maxBytes);
  const cap = capped(source.name, maxBytes);
  // Ignored: errors reach the reader through `cap`; the promise only ends the pipeline, so nothing is lost.
  settle(pipeline(source.stream, cap, { signal }), () => undefined);
  return { stream: cap };
}

/** A safe file name for the temporary copy: the last path segment, reduced to harmless characters. */
export function fileNameFor(name: string, index: number): string {
  const last =
    name
      .split("/")
      .filter((s) => s !== "")
      .pop() ?? "";
  let decoded = last;
  try {
    decoded = decodeURIComponent(last);
  } catch {
    // A malformed escape is kept as typed; it is only a file name.
  }
  const safe = decoded
    .replace(/[^A-Za-z0-9._-]/g, "_")
    .replace(/^\.+/, "")
    .slice(-100);
  return `${index}-${safe === "" ? "download" : safe}`;
}

function parseContentLength(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Opens an http(s) URL for reading through the worker's one transport (src/http/transport.ts:
 * node:http, its redirect rule and abort path), following up to its 10 redirects. Unless
 * `allowPrivate`, every hop whose host is, or resolves to, a private address is refused with
 * RUNLET_S3_DOWNLOAD_REFUSED. An answer other than 200 fails with RUNLET_URL_DOWNLOAD_HTTP (its
 * status in `details`, none of its body); a connection that fails before the answer, with
 * RUNLET_URL_DOWNLOAD_FAILED.
 */
export async function openUrl(
  url: URL,
  options: { allowPrivate: boolean; signal: AbortSignal },
): Promise<Source & { close: () => Promise<void> }> {
  const shown = (u: URL) => `${u.origin}${u.pathname}`;
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new RunletError(
      "RUNLET_S3_DOWNLOAD_REFUSED",
      `download of ${shown(url)} refused: only http and https URLs are fetched`,
      { details: { url: shown(url) } },
    );
  }
  let current = url;
  const transport = new HttpTransport({
    userAgent: USER_AGENT,
    name: "the download's",
    // One connection per download, closed with it: a guarded lookup never serves another's socket.
    keepAlive: false,
    ...(options.allowPrivate ? {} : { lookup: guardedLookup(() => current) }),
    checkHop: (hop) => {
      current = hop;
      // Sockets skip `lookup` for literal addresses, so those are checked here.
      const host = hop.hostname.replace(/^\[|\]$/g, "");
      if (!options.allowPrivate && isIP(host) !== 0 && isPrivateAddress(host)) throw refusedError(hop, host);
    },
  });
  const close = () => transport.close().catch(() => undefined);
  let opened: Awaited<ReturnType<HttpTransport["open"]>>;
  try {
    opened = await transport.open(url.href, { signal: options.signal });
  } catch (err) {
    await close();
    const own = findRunletError(err);
    if (own !== undefined && own.code !== "RUNLET_REQUEST_REDIRECTS") throw own;
    if (options.signal.aborted) throw err;
    throw new RunletError(
      "RUNLET_URL_DOWNLOAD_FAILED",
      `download of ${shown(current)} failed before an answer: ${(err as Error).message}`,
      { cause: err, details: { url: shown(current) } },
    );
  }
  const final = new URL(opened.url);
  if (opened.status !== 200) {
    opened.body.on("error", () => undefined);
    opened.body.destroy();
    await close();
    throw new RunletError(
      "RUNLET_URL_DOWNLOAD_HTTP",
      `download of ${shown(final)} was answered HTTP ${opened.status}${
        opened.status === 404
          ? " (not found)"
          : opened.status === 403 || opened.status === 401
            ? " (not allowed)"
            : ""
      }`,
      { details: { url: shown(final), status: opened.status } },
    );
  }
  const stream = opened.body as Readable;
  // close() ignores its own failure (the download is over either way).
  stream.once("close", () => settle(close(), () => undefined));
  return {
    stream,
    contentLength: parseContentLength(opened.headers["content-length"]),
    name: shown(final),
    close,
  };
}
/** Our own error in a fetch failure's cause chain (a refused lookup surfaces as a socket error). */
function findRunletError(err: unknown): RunletError | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && typeof e === "object" && e !== null; i++) {
    if (isRunletError(e)) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
