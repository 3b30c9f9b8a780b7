import { RunletError } from "../errors.js";
import type { StreamChunk } from "../protocol/index.js";
import type { StreamEncoding } from "./split.js";

const ENCODINGS: ReadonlySet<string> = new Set<StreamEncoding>(["json", "string", "json-text", "base64"]);

/** The split position a runlet chunk carries in its metrics. */
interface PartInfo {
  readonly streamIndex: number;
  readonly part: number;
  readonly parts: number;
  readonly encoding: StreamEncoding;
}

/** Puts stream chunks back into the values the handler yielded, one chunk at a time. */
export interface Reassembler {
  /**
   * Takes the next chunk, in stream order, and returns the values it completes (none while an item's
   * parts are still arriving). A base64 item comes back as a Buffer (a Uint8Array).
   *
   * @throws RunletError `RUNLET_STREAM_REASSEMBLY` when a part or an item is missing or out of order.
   */
  push(chunk: StreamChunk): unknown[];
  /** Checks that the stream ended on an item boundary. @throws RunletError `RUNLET_STREAM_REASSEMBLY` otherwise. */
  finish(): void;
  /** True while an item's parts have started arriving but not all have. */
  readonly pending: boolean;
}

/**
 * Creates an incremental reassembler for a stream read from its start.
 *
 * Chunks without runlet's split metrics (from another worker library) pass through as their
 * `output`. Runlet chunks must arrive in order: items by consecutive `streamIndex` from the first
 * seen, parts `0..parts-1` of one item before the next item starts.
 *
 * @example
 * const r = createReassembler();
 * for (const chunk of body.stream) for (const value of r.push(chunk)) use(value);
 */
export function createReassembler(): Reassembler {
  let current: { info: PartInfo; slices: unknown[] } | undefined;
  let nextIndex: number | undefined;

  const fail = (message: string, details: Record<string, unknown>): never => {
    throw new RunletError(
      "RUNLET_STREAM_REASSEMBLY",
      `${message}; read the stream from its start with one reader`,
      {
        details,
      },
    );
  };

  return {
    get pending() {
      return current !== undefined;
    },
    push(chunk) {
      const info = partInfo(chunk.metrics);
      if (info === undefined) {
        if (current !== undefined) {
          fail(`a chunk without split metrics arrived inside item ${current.info.streamIndex}`, {
            streamIndex: current.info.streamIndex,
          });
        }
        return [chunk.output];
      }
      if (current === undefined) {
        if (info.part !== 0) {
          fail(`item ${info.streamIndex} starts at part ${info.part}, not 0`, { ...info });
        }
        if (nextIndex !== undefined && info.streamIndex !== nextIndex) {
          fail(`expected item ${nextIndex}, got item ${info.streamIndex}`, { ...info, expected: nextIndex });
        }
        current = { info, slices: [] };
      } else {
        const want = current.info;
        if (
          info.streamIndex !== want.streamIndex ||
          info.parts !== want.parts ||
          info.encoding !== want.encoding
        ) {
          fail(`item ${want.streamIndex} is missing parts after ${current.slices.length - 1}`, {
            ...info,
            expected: want.streamIndex,
          });
        }
        if (info.part !== current.slices.length) {
          fail(`item ${want.streamIndex}: expected part ${current.slices.length}, got part ${info.part}`, {
            ...info,
          });
        }
      }
      current.slices.push(chunk.output);
      if (current.slices.length < current.info.parts) return [];
      const done = current;
      current = undefined;
      nextIndex = done.info.streamIndex + 1;
      return [decode(done.info, done.slices)];
    },
    finish() {
      if (current !== undefined) {
        fail(`the stream ended inside item ${current.info.streamIndex}`, {
          streamIndex: current.info.streamIndex,
          received: current.slices.length,
          parts: current.info.parts,
        });
      }
    },
  };
}

/**
 * Reassembles a whole stream's chunks (for example every `stream` array a plain HTTP client read
 * from `/stream/<id>`, concatenated) into the values the handler yielded.
 *
 * @throws RunletError `RUNLET_STREAM_REASSEMBLY` when a part is missing or out of order.
 * @example
 * const values = reassemble(allChunks); // strings, JSON values, and Buffers for yielded bytes
 */
export function reassemble(chunks: Iterable<StreamChunk>): unknown[] {
  const reassembler = createReassembler();
  const values: unknown[] = [];
  for (const chunk of chunks) values.push(...reassembler.push(chunk));
  reassembler.finish();
  return values;
}

function partInfo(metrics: StreamChunk["metrics"]): PartInfo | undefined {
  if (metrics === undefined) return undefined;
  const { streamIndex, part, parts, encoding } = metrics;
  if (
    !Number.isInteger(streamIndex) ||
    !Number.isInteger(part) ||
    !Number.isInteger(parts) ||
    typeof encoding !== "string" ||
    !ENCODINGS.has(encoding)
  ) {
    return undefined;
  }
  const info = { streamIndex, part, parts, encoding } as PartInfo;
  if (
    info.parts < 1 ||
    info.part < 0 ||
    info.part >= info.parts ||
    (info.encoding === "json" && info.parts !== 1)
  ) {
    throw new RunletError(
      "RUNLET_STREAM_REASSEMBLY",
      `chunk metrics are inconsistent: ${JSON.stringify(info)}`,
      {
        details: { ...info },
      },
    );
  }
  return info;
}

function decode(info: PartInfo, slices: unknown[]): unknown {
  if (info.encoding === "json") return slices[0];
  const texts = slices.map((slice, part) => {
    if (typeof slice !== "string") {
      throw new RunletError(
        "RUNLET_STREAM_REASSEMBLY",
        `item ${info.streamIndex} part ${part} (${info.encoding}) is not a string`,
        { details: { ...info, part } },
      );
    }
    return slice;
  });
  if (info.encoding === "string") return texts.join("");
  if (info.encoding === "base64") {
    // Each slice is padded base64 of whole 3-byte groups, so decode slice by slice.
    return Buffer.concat(texts.map((text) => Buffer.from(text, "base64")));
  }
  try {
    return JSON.parse(texts.join(""));
  } catch (cause) {
    throw new RunletError("RUNLET_STREAM_REASSEMBLY", `item ${info.streamIndex}'s JSON text does not parse`, {
      cause,
      details: { ...info },
    });
  }
}
