import { RunletError } from "../errors.js";
import type { ChunkMetrics, StreamChunk } from "../protocol/index.js";
import { MAX_STREAM_CHUNK_BYTES } from "../protocol/limits.js";
import { sliceEnds } from "./slice-text.js";

/** How a chunk's `output` encodes its item (see docs/streaming.md). */
export type StreamEncoding = ChunkMetrics["encoding"];

/** A handler's own per-chunk metrics (token counts, labels); runlet's keys win on a clash. */
export type ExtraMetrics = Readonly<Record<string, number | string>>;

/** Metric keys runlet sets on every chunk; a handler's metric of the same name is dropped. */
export const RUNLET_METRIC_KEYS: ReadonlySet<string> = new Set([
  "streamIndex",
  "part",
  "parts",
  "encoding",
  "bytes",
]);

/**
 * Below this many bytes of room for `output` a chunk could not carry a useful slice, so the
 * handler's metrics must be what crowds it out: fail loudly rather than emit thousands of tiny chunks.
 */
const MIN_OUTPUT_ROOM_BYTES = 64;
/** `{"output":` + `,"metrics":` + `}`: the fixed bytes of a chunk around its output and metrics. */
const ENVELOPE_BYTES = 22;
/** The most UTF-8 bytes one code point of a string costs once JSON-escaped (`\u001f`, a lone surrogate). */
const MAX_CODE_POINT_BYTES = 6;

/**
 * Turns one yielded value into the stream chunks posted for it, each `{output, metrics}` whose JSON
 * is at most `maxChunkBytes` bytes (docs/protocol.md, "Job API" rule 2), made one at a time as they are
 * iterated: a 100 MB item never has all its chunks in memory at once, so a byte budget on unposted
 * chunks bounds memory within one item too.
 *
 * A value that fits is one chunk (`encoding: "json"`, or `"base64"` for bytes, which JSON cannot
 * carry). A larger one is split: strings into string slices cut between code points, bytes into
 * base64 slices, other values into slices of their JSON text. `reassemble()` undoes it. Every
 * check runs before the first chunk is made, so a value that cannot be sent yields no chunk.
 *
 * @throws RunletError `RUNLET_OUTPUT_UNSERIALIZABLE` for a BigInt, a cycle, or a value with no JSON
 *   form (`undefined`, a function); `RUNLET_OUTPUT_TOO_LARGE` when the handler's metrics alone leave
 *   no room for output. Thrown by this call, never by the iteration.
 * @example
 * for (const chunk of splitItemIter(token, index, { tokens: 1 })) await post(JSON.stringify(chunk));
 */
export function splitItemIter(
  value: unknown,
  streamIndex: number,
  extraMetrics: ExtraMetrics = {},
  maxChunkBytes: number = MAX_STREAM_CHUNK_BYTES,
): Iterable<StreamChunk> {
  if (value instanceof Uint8Array) return splitBytes(value, streamIndex, extraMetrics, maxChunkBytes);
  // A string longer than the limit in code units cannot fit (every unit is at least one byte), so
  // skip serialising a possibly huge string just to learn that.
  if (typeof value === "string" && value.length + 2 + ENVELOPE_BYTES > maxChunkBytes) {
    return splitText(value, "string", undefined, streamIndex, extraMetrics, maxChunkBytes);
  }
  const json = toJson(value);
  const bytes = Buffer.byteLength(json);
  const metrics = buildMetrics(streamIndex, 0, 1, "json", bytes, extraMetrics);
  const metricsJson = JSON.stringify(metrics);
  if (ENVELOPE_BYTES + bytes + Buffer.byteLength(metricsJson) <= maxChunkBytes) {
    const chunk = { output: value, metrics };
    // A primitive serialises the same wherever it sits (only an object's toJSON sees its key).
    if (typeof value !== "object") knownJson.set(chunk, `{"output":${json},"metrics":${metricsJson}}`);
    return [chunk];
  }
  if (typeof value === "string") {
    return splitText(value, "string", bytes, streamIndex, extraMetrics, maxChunkBytes);
  }
  return splitText(json, "json-text", bytes, streamIndex, extraMetrics, maxChunkBytes);
}

/**
 * The JSON text of small chunks this module made (serialised once to measure the item), so a
 * token is not turned into JSON twice. Weak, so a chunk that was never posted is simply collected.
 */
const knownJson = new WeakMap<StreamChunk, string>();

/**
 * Slices of a large string that are plain ASCII (nothing JSON escapes, every code unit one byte),
 * as {@link splitText} found when it planned them: their JSON is the slice in quotes, so it is
 * written straight into the bytes posted, never escaped or scanned again.
 */
const plainSlices = new WeakSet<StreamChunk>();

/** `{"output":"` and `","metrics":`, the fixed text around a plain slice. */
const PLAIN_HEAD = '{"output":"';
const PLAIN_MIDDLE = '","metrics":';

/**
 * The JSON text of a chunk, exactly `JSON.stringify(chunk)`, without serialising the output again
 * when {@link splitItemIter} made the chunk.
 *
 * @example
 * for (const chunk of splitItemIter(token, index)) await post(chunkJson(chunk));
 */
export function chunkJson(chunk: StreamChunk): string {
  const known = knownJson.get(chunk);
  if (known !== undefined) return known;
  if (plainSlices.has(chunk)) {
    return `${PLAIN_HEAD}${chunk.output as string}${PLAIN_MIDDLE}${JSON.stringify(chunk.metrics)}}`;
  }
  return JSON.stringify(chunk);
}

/**
 * A chunk's body as posted: the UTF-8 bytes of {@link chunkJson}. A slice of a large plain string
 * is written once, straight from the string into one Buffer (no joined string to flatten, and no
 * second copy when the HTTP client turns a string body into bytes); any other chunk is its JSON
 * text, which is short or needs escaping anyway.
 *
 * @example
 * for (const chunk of splitItemIter(text, index)) await post(chunkBody(chunk));
 */
export function chunkBody(chunk: StreamChunk): string | Buffer {
  if (!plainSlices.has(chunk)) return chunkJson(chunk);
  const slice = chunk.output as string;
  // The metrics may hold a handler's non-ASCII strings: only the slice is known to be one byte a unit.
  const tail = `${PLAIN_MIDDLE}${JSON.stringify(chunk.metrics)}}`;
  const tailBytes = Buffer.byteLength(tail);
  const body = Buffer.allocUnsafe(PLAIN_HEAD.length + slice.length + tailBytes);
  let at = body.write(PLAIN_HEAD, 0, "latin1");
  at += body.write(slice, at, "latin1");
  body.write(tail, at, tailBytes, "utf8");
  return body;
}

/**
 * {@link splitItemIter} as an array: every chunk of the item at once (tests, small items, other
 * clients' tooling). Same chunks, same order, same errors.
 *
 * @example
 * for (const chunk of splitItem(token, index, { tokens: 1 })) await post(JSON.stringify(chunk));
 */
export function splitItem(
  value: unknown,
  streamIndex: number,
  extraMetrics: ExtraMetrics = {},
  maxChunkBytes: number = MAX_STREAM_CHUNK_BYTES,
): StreamChunk[] {
  return [...splitItemIter(value, streamIndex, extraMetrics, maxChunkBytes)];
}

/** Builds a chunk's metrics: runlet's keys first, then the handler's that do not clash. */
function buildMetrics(
  streamIndex: number,
  part: number,
  parts: number,
  encoding: StreamEncoding,
  bytes: number,
  extraMetrics: ExtraMetrics,
): Record<string, number | string> {
  const metrics: Record<string, number | string> = { streamIndex, part, parts, encoding, bytes };
  for (const [key, metric] of Object.entries(extraMetrics)) {
    if (RUNLET_METRIC_KEYS.has(key)) continue;
    // An own "__proto__" key must stay data, not replace the object's prototype.
    if (key === "__proto__") Object.defineProperty(metrics, key, { value: metric, enumerable: true });
    else metrics[key] = metric;
  }
  return metrics;
}

/** JSON text of a value, or RUNLET_OUTPUT_UNSERIALIZABLE saying why there is none. */
function toJson(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (cause) {
    throw new RunletError(
      "RUNLET_OUTPUT_UNSERIALIZABLE",
      `a streamed value cannot be turned into JSON (${(cause as Error).message}); yield plain JSON values, strings or bytes`,
      { cause },
    );
  }
  if (json === undefined) {
    throw new RunletError(
      "RUNLET_OUTPUT_UNSERIALIZABLE",
      `a streamed value of type ${typeof value} has no JSON form; yield plain JSON values, strings or bytes`,
      { details: { type: typeof value } },
    );
  }
  return json;
}

/**
 * Room left for a slice's `output` JSON once metrics are in, sized for the widest `part`/`parts`
 * numbers this split can need. The part count depends on the room and the room on the count's
 * digits, so widen the digits until the worst-case count fits them.
 */
function outputRoom(
  streamIndex: number,
  encoding: StreamEncoding,
  size: { readonly bytesMetricUpper: number; readonly outputBytesUpper: number },
  minSliceBytes: (room: number) => number,
  extraMetrics: ExtraMetrics,
  maxChunkBytes: number,
): number {
  for (let digits = 1; digits <= 16; digits++) {
    const widest = 10 ** digits - 1;
    const metrics = buildMetrics(streamIndex, widest, widest, encoding, size.bytesMetricUpper, extraMetrics);
    const room = maxChunkBytes - ENVELOPE_BYTES - Buffer.byteLength(JSON.stringify(metrics));
    if (room < MIN_OUTPUT_ROOM_BYTES) {
      throw new RunletError(
        "RUNLET_OUTPUT_TOO_LARGE",
        `stream chunk metrics leave ${room} bytes of the ${maxChunkBytes}-byte chunk limit for output; send fewer or shorter metrics`,
        { details: { maxChunkBytes, roomBytes: room } },
      );
    }
    const partsUpper = Math.ceil(size.outputBytesUpper / Math.max(1, minSliceBytes(room)));
    if (partsUpper <= widest) return room;
  }
  throw new RunletError(
    "RUNLET_OUTPUT_TOO_LARGE",
    `a streamed value of ${size.bytesMetricUpper} bytes is too large to split`,
  );
}

function splitText(
  text: string,
  encoding: "string" | "json-text",
  knownBytes: number | undefined,
  streamIndex: number,
  extraMetrics: ExtraMetrics,
  maxChunkBytes: number,
): Iterable<StreamChunk> {
  // Plan the metrics' widths for the worst case, then measure the real thing. JSON-escaping makes a
  // code unit of a string cost 1 to 6 bytes. Slices of JSON text are escaped once more as strings:
  // only its quotes and backslashes grow (to 2 bytes; control characters are already escaped).
  const bytesMetricUpper = knownBytes ?? MAX_CODE_POINT_BYTES * text.length + 2;
  const outputBytesUpper = encoding === "json-text" ? 2 * Buffer.byteLength(text) + 2 : bytesMetricUpper;
  const room = outputRoom(
    streamIndex,
    encoding,
    { bytesMetricUpper, outputBytesUpper },
    // A slice ends only when the next code point does not fit, so each but the last holds more than this.
    (r) => r - 2 - MAX_CODE_POINT_BYTES,
    extraMetrics,
    maxChunkBytes,
  );
  const { ends, bytes: sliceBytes } = sliceEnds(text, room - 2);
  // `bytes` is the item's JSON size: the string item's own (quotes and escapes included), or the
  // JSON text's UTF-8 length for other values.
  const bytes = knownBytes ?? sliceBytes + 2;
  return textSlices(
    text,
    ends,
    // One byte per code unit means nothing in the text is escaped: a slice's JSON is the slice in quotes.
    sliceBytes === text.length,
    (part) => buildMetrics(streamIndex, part, ends.length, encoding, bytes, extraMetrics),
  );
}

/** The planned slices of `text`, each made only when the consumer asks for it. */
function* textSlices(
  text: string,
  ends: readonly number[],
  plain: boolean,
  metricsOf: (part: number) => Record<string, number | string>,
): Generator<StreamChunk, void, undefined> {
  let start = 0;
  for (const [part, end] of ends.entries()) {
    // A slice of a flat string shares its memory: nothing is copied until the chunk is posted.
    const chunk = { output: text.slice(start, end), metrics: metricsOf(part) };
    if (plain) plainSlices.add(chunk);
    yield chunk;
    start = end;
  }
}

function splitBytes(
  data: Uint8Array,
  streamIndex: number,
  extraMetrics: ExtraMetrics,
  maxChunkBytes: number,
): Iterable<StreamChunk> {
  const whole = buildMetrics(streamIndex, 0, 1, "base64", data.byteLength, extraMetrics);
  const wholeBytes =
    ENVELOPE_BYTES + Buffer.byteLength(JSON.stringify(whole)) + base64Length(data.byteLength);
  if (wholeBytes + 2 <= maxChunkBytes) return [{ output: base64(data, 0, data.byteLength), metrics: whole }];

  // Base64 is plain ASCII (never escaped): 4 characters per 3 bytes, so slices of a multiple of 3
  // bytes decode on their own and concatenate back exactly.
  const rawPerSlice = (room: number) => Math.floor((room - 2) / 4) * 3;
  const size = { bytesMetricUpper: data.byteLength, outputBytesUpper: data.byteLength };
  const room = outputRoom(streamIndex, "base64", size, rawPerSlice, extraMetrics, maxChunkBytes);
  const step = rawPerSlice(room);
  return byteSlices(data, step, (part, parts) =>
    buildMetrics(streamIndex, part, parts, "base64", data.byteLength, extraMetrics),
  );
}

/** Base64 slices of `step` bytes each, each encoded only when the consumer asks for it. */
function* byteSlices(
  data: Uint8Array,
  step: number,
  metricsOf: (part: number, parts: number) => Record<string, number | string>,
): Generator<StreamChunk, void, undefined> {
  const parts = Math.ceil(data.byteLength / step);
  for (let part = 0; part < parts; part++) {
    const start = part * step;
    yield {
      output: base64(data, start, Math.min(data.byteLength, start + step)),
      metrics: metricsOf(part, parts),
    };
  }
}

function base64Length(byteLength: number): number {
  return Math.ceil(byteLength / 3) * 4;
}

function base64(data: Uint8Array, start: number, end: number): string {
  // A view over the same memory: no copy of a possibly large buffer.
  return Buffer.from(data.buffer, data.byteOffset + start, end - start).toString("base64");
}
