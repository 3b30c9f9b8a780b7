import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { isIP } from "node:net";
import { type Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Agent, request } from "undici";
import { isRunletError, RunletError } from "../errors.js";
import { USER_AGENT } from "../version.js";
import { guardedLookup, isPrivateAddress, refusedError } from "./private-address.js";

const MAX_REDIRECTS = 5;

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
  // Errors reach the reader through `cap`; the promise only ends the pipeline, so nothing is lost.
  pipeline(source.stream, cap, { signal }).catch(() => undefined);
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
 * Opens an http(s) URL for reading, following up to 5 redirects. Unless `allowPrivate`, every hop
 * whose host is, or resolves to, a private address is refused with RUNLET_S3_DOWNLOAD_REFUSED.
 */
export async function openUrl(
  url: URL,
  options: { allowPrivate: boolean; signal: AbortSignal },
): Promise<Source & { close: () => Promise<void> }> {
  let current = url;
  const agent = new Agent(options.allowPrivate ? {} : { connect: { lookup: guardedLookup(() => current) } });
  const close = () => agent.close().catch(() => undefined);
  try {
    for (let hop = 0; ; hop++) {
      const shown = `${current.origin}${current.pathname}`;
      if (current.protocol !== "http:" && current.protocol !== "https:") {
        throw new RunletError(
          "RUNLET_S3_DOWNLOAD_REFUSED",
          `download of ${shown} refused: only http and https URLs are fetched`,
          {
            details: { url: shown },
          },
        );
      }
      // Sockets skip `lookup` for literal addresses, so those are checked here.
      const host = current.hostname.replace(/^\[|\]$/g, "");
      if (!options.allowPrivate && isIP(host) !== 0 && isPrivateAddress(host))
        throw refusedError(current, host);
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(current, {
          dispatcher: agent,
          method: "GET",
          headers: { "user-agent": USER_AGENT },
          signal: options.signal,
        });
      } catch (err) {
        const refused = findRunletError(err);
        if (refused !== undefined) throw refused;
        if (options.signal.aborted) throw err;
        throw new RunletError(
          "RUNLET_S3_REQUEST_FAILED",
          `download of ${shown} failed: ${(err as Error).message}`,
          {
            cause: err,
            details: { url: shown },
          },
        );
      }
      const { location } = res.headers;
      if (res.statusCode >= 300 && res.statusCode < 400 && location !== undefined && hop < MAX_REDIRECTS) {
        await res.body.dump();
        current = new URL(Array.isArray(location) ? (location[0] ?? "") : location, current);
        continue;
      }
      if (res.statusCode !== 200) {
        const text = (await res.body.text().catch(() => "")).slice(0, 300);
        throw new RunletError(
          "RUNLET_S3_REQUEST_FAILED",
          `download of ${shown} failed with HTTP ${res.statusCode}${text ? `: ${text}` : ""}`,
          { details: { url: shown, status: res.statusCode } },
        );
      }
      const stream = res.body as unknown as Readable;
      stream.once("close", () => void close());
      return { stream, contentLength: parseContentLength(res.headers["content-length"]), name: shown, close };
    }
  } catch (err) {
    await close();
    throw err;
  }
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
