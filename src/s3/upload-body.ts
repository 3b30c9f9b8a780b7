import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { extname } from "node:path";
import { pipeline, Readable, Transform } from "node:stream";

/** What `ctx.s3.upload` accepts. */
export type UploadBody = Buffer | Uint8Array | string | { path: string } | Readable;

/** A body ready for lib-storage's Upload, with a way to learn how many bytes went out. */
export interface PreparedBody {
  readonly body: Uint8Array | Readable;
  /** Known up front for buffers, strings and files; counted while streaming otherwise. */
  readonly contentLength: number | undefined;
  readonly contentType: string;
  /** File extension for a default key (`.png`), or "". */
  readonly extension: string;
  /** Bytes read so far (final once the upload completes). */
  bytes(): number;
  /** Releases the source (closes a file we opened; ends a stream the upload gave up on). */
  dispose(): void;
  /** The error the source itself failed with (a file read, the caller's stream), if it did. */
  sourceError(): unknown;
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".bmp": "image/bmp",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".svg": "image/svg+xml",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".wav": "audio/wav",
  ".mp3": "audio/mpeg",
  ".ogg": "audio/ogg",
  ".flac": "audio/flac",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".gz": "application/gzip",
  ".zip": "application/zip",
  ".tar": "application/x-tar",
  ".pdf": "application/pdf",
  ".safetensors": "application/octet-stream",
};

/** A content type from a file extension, `application/octet-stream` when unknown. */
export function contentTypeFor(extension: string): string {
  return CONTENT_TYPES[extension.toLowerCase()] ?? "application/octet-stream";
}

function isPathBody(body: unknown): body is { path: string } {
  return (
    typeof body === "object" &&
    body !== null &&
    !(body instanceof Uint8Array) &&
    !(body instanceof Readable) &&
    typeof (body as { path?: unknown }).path === "string"
  );
}

/** A pass-through that counts bytes: the size of a stream is only known once it has been read. */
function counting(source: Readable): {
  stream: Readable;
  bytes: () => number;
  dispose: () => void;
  sourceError: () => unknown;
} {
  let total = 0;
  let failed: unknown;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      total += chunk.length;
      callback(null, chunk);
    },
  });
  source.on("error", (err) => {
    failed ??= err;
  });
  // stream.pipeline, not .pipe(): an error on either side destroys both (the upload reads
  // `counter`, which errors with it); the callback's error is the one the upload already sees.
  const stream = pipeline(source, counter, () => undefined);
  return {
    stream,
    bytes: () => total,
    sourceError: () => failed,
    dispose: () => {
      source.destroy();
      counter.destroy();
    },
  };
}

/**
 * Normalises an upload body. Throws a TypeError naming what came when the body is none of the
 * accepted kinds (a programming error in the handler, not a store failure).
 */
export async function prepareBody(body: UploadBody, contentType: string | undefined): Promise<PreparedBody> {
  if (typeof body === "string") {
    const data = Buffer.from(body, "utf8");
    return fixed(data, contentType ?? "text/plain; charset=utf-8", "");
  }
  if (body instanceof Uint8Array) {
    return fixed(body, contentType ?? "application/octet-stream", "");
  }
  if (isPathBody(body)) {
    const info = await stat(body.path);
    if (!info.isFile()) throw new TypeError(`upload body { path } must name a file, got ${body.path}`);
    const extension = extname(body.path);
    const { stream, bytes, dispose, sourceError } = counting(createReadStream(body.path));
    return {
      body: stream,
      contentLength: info.size,
      contentType: contentType ?? contentTypeFor(extension),
      extension,
      bytes,
      dispose,
      sourceError,
    };
  }
  if (body instanceof Readable) {
    const { stream, bytes, dispose, sourceError } = counting(body);
    return {
      body: stream,
      contentLength: undefined,
      contentType: contentType ?? "application/octet-stream",
      extension: "",
      bytes,
      dispose,
      sourceError,
    };
  }
  throw new TypeError(
    `upload body must be a Buffer, a Uint8Array, a string, { path } or a Readable, got ${
      body === null ? "null" : typeof body
    }`,
  );
}

function fixed(data: Uint8Array, contentType: string, extension: string): PreparedBody {
  return {
    body: data,
    contentLength: data.byteLength,
    contentType,
    extension,
    bytes: () => data.byteLength,
    dispose: () => undefined,
    sourceError: () => undefined,
  };
}
