import { defineHandler } from "../../src/index.js";

/**
 * The bench's streaming handler. `{ items: N }` yields N short strings (a token stream);
 * `{ bytes: N }` yields one string of N bytes (split into ≤ 1 MiB chunks on the way out).
 * BENCH_COALESCE_MS turns on `streamCoalesceMs` for the coalesced variant.
 */
const streamCoalesceMs = Number(process.env["BENCH_COALESCE_MS"] ?? "0");

/** Characters per piece of the large string: 1 MB. */
const PIECE_CHARS = 1_000_000;
/** The last large string made, kept for the next job that asks for the same size. */
let large: { readonly bytes: number; readonly text: string } | undefined;

/**
 * A flat string of `bytes` "x"s, made once per size and then reused. The figure measures runlet
 * streaming a string the handler holds, not the handler making it: `"x".repeat(N)` alone is a rope
 * of millions of short pieces that V8 joins on first read (about 0.7 ms per MB, charged to
 * whoever reads it first), while a real handler's text (read, decoded, joined) is flat already;
 * and a fresh 100 MB string per job leaves the last one for V8's next full collection, which can
 * be several jobs away, so the peak RSS would count old items as well as runlet's own memory.
 */
function largeString(bytes: number): string {
  if (large?.bytes !== bytes) {
    large = undefined;
    const piece = "x".repeat(Math.min(bytes, PIECE_CHARS));
    piece.charCodeAt(0); // flat, so the whole string below is joined from 1 MB pieces, not 10-byte ones
    const text = piece.repeat(Math.floor(bytes / piece.length)) + piece.slice(0, bytes % piece.length);
    // Joins the few 1 MB pieces into one flat string now (a read of one character does it).
    text.charCodeAt(0);
    large = { bytes, text };
  }
  return large.text;
}

export default defineHandler({
  streamCoalesceMs,
  async *handler({ input }) {
    const { items, bytes } = input as { items?: number; bytes?: number };
    if (typeof bytes === "number") {
      yield largeString(bytes);
      return;
    }
    for (let i = 0; i < (items ?? 0); i++) yield `tok${i} `;
  },
});
