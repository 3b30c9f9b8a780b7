import type { StreamChunk } from "../../protocol/worker-bodies.js";
import { createReassembler, type Reassembler } from "../../stream/index.js";

/** What the relay writes to the response: text, or bytes exactly as a handler yielded them. */
export type SsePiece = string | Uint8Array;

/**
 * One stream item as server-sent events: text as it is (handlers that speak SSE themselves), bytes
 * as they are (SSE text in UTF-8, as a proxy reads it off an upstream server), a list element by
 * element, any other value as one `data: <json>` event.
 */
export function frame(item: unknown): SsePiece[] {
  if (typeof item === "string") return item === "" ? [] : [item];
  if (item instanceof Uint8Array) return item.byteLength === 0 ? [] : [item];
  // A list is one event per element: the platform's vLLM worker yields lists of chunk objects when
  // RAW_OPENAI_OUTPUT=0 (its default, 1, yields joined raw SSE strings, written as they are above).
  if (Array.isArray(item)) return item.flatMap(frame);
  return [`data: ${JSON.stringify(item)}\n\n`];
}

/**
 * Turns a job's stream chunks back into its items and those into SSE pieces. An item the worker
 * split over several chunks (over 1 MiB, or bytes: docs/streaming.md, "Encodings") is framed once
 * whole — a JSON-text slice or a base64 slice is not SSE text — so an object over 1 MiB is one
 * event and bytes are written as bytes. Chunks without runlet's split metrics are items as they are.
 */
export class SseFramer {
  readonly #reassembler: Reassembler = createReassembler();

  /**
   * The pieces the chunk completes (none while an item's parts are still arriving).
   *
   * @throws RunletError `RUNLET_STREAM_REASSEMBLY` when the worker's chunks are out of order or broken.
   */
  push(chunk: StreamChunk): SsePiece[] {
    return this.#reassembler.push(chunk).flatMap(frame);
  }

  /** @throws RunletError `RUNLET_STREAM_REASSEMBLY` when the stream ended inside a split item. */
  finish(): void {
    this.#reassembler.finish();
  }
}

/** The last `length` characters of what has been written, bytes read as Latin-1 (enough for ASCII). */
export function tailOf(previous: string, piece: SsePiece, length: number): string {
  const text =
    typeof piece === "string"
      ? piece.slice(-length)
      : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength).subarray(-length).toString("latin1");
  return (previous + text).slice(-length);
}
