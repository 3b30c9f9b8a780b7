/**
 * Splits a server-sent-event stream into its events as its bytes arrive, for the OpenAI relay
 * (sidecar-relay.ts). Each byte is looked at once, when it arrives, and copied once, into its
 * event: the work is linear in the stream's length however the events are cut into chunks. (The
 * splitter it replaced searched all the text not yet sent on each chunk, so one long event without
 * its blank line cost time in the square of its length.)
 *
 * An event ends at a blank line (`\r?\n\r?\n`); it is given back with `\r\n` made `\n` and one
 * blank line after it, otherwise untouched (its `data:`, `event:` and `id:` lines as sent). The
 * bytes are split, not text: `\n` and `\r` never occur inside a UTF-8 sequence, so a character
 * cut between two chunks is decoded whole.
 */

const LF = 0x0a;
const CR = 0x0d;

/** The splitter of one stream (see the file's summary). */
export class SseEventSplitter {
  /** The bytes not yet given back, in the order they came (views: nothing is copied to keep them). */
  #parts: Uint8Array[] = [];
  /** Their total length. */
  #pending = 0;
  /** The last byte before the newest chunk (`\r` or not), for a line break cut between two chunks. */
  #lastByte = -1;
  /** Offset (into the pending bytes) of the last `\n` seen, or -1. */
  #lastLf = -1;
  /** Where the line break that the last `\n` ends started (at its `\r`, if one came before it). */
  #lastBreak = -1;

  /** Bytes searched for line breaks, copied and decoded so far (see {@link work}). */
  #work = { scanned: 0, copied: 0 };

  /**
   * The work done so far, in bytes: `scanned` counts the bytes searched for line breaks, `copied`
   * the bytes copied or decoded into events. Both stay within a small multiple of the bytes pushed
   * (the tests check it: a splitter that searches or copies its pending bytes again on each chunk
   * grows them in the square of an event's length).
   */
  get work(): { readonly scanned: number; readonly copied: number } {
    return { ...this.#work };
  }

  /** Bytes received and not yet given back as an event (what a bound on one event counts). */
  get pendingBytes(): number {
    return this.#pending;
  }

  /** Takes the next chunk; gives back the events it completed (none, one or several). */
  push(chunk: Uint8Array): string[] {
    const events: string[] = [];
    if (chunk.byteLength === 0) return events;
    this.#parts.push(chunk);
    // The offset of chunk[0] among the pending bytes; it moves back as events are taken out.
    let base = this.#pending;
    this.#pending += chunk.byteLength;
    // A Buffer view of the chunk (no copy), for its native search.
    const view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let from = 0;
    for (;;) {
      const at = view.indexOf(LF, from);
      this.#work.scanned += (at === -1 ? chunk.byteLength : at + 1) - from;
      if (at === -1) break;
      const offset = base + at;
      const before = at > 0 ? chunk[at - 1] : this.#lastByte;
      const blankLine =
        this.#lastLf !== -1 &&
        (offset - this.#lastLf === 1 || (offset - this.#lastLf === 2 && before === CR));
      if (blankLine) {
        const event = this.#take(this.#lastBreak, offset + 1);
        if (event !== undefined) events.push(event);
        base = -(at + 1);
        this.#lastLf = -1;
        this.#lastBreak = -1;
      } else {
        this.#lastLf = offset;
        this.#lastBreak = before === CR ? offset - 1 : offset;
      }
      from = at + 1;
    }
    this.#lastByte = chunk[chunk.byteLength - 1]!;
    return events;
  }

  /** The stream ended: what is left, as a last event (undefined when only blank). */
  end(): string | undefined {
    const rest = this.#take(this.#pending, this.#pending);
    this.#lastByte = -1;
    this.#lastLf = -1;
    this.#lastBreak = -1;
    return rest;
  }

  /**
   * Gives back the first `eventEnd` pending bytes as an event (undefined when blank) and drops the
   * first `consumed` (the event and its blank line). The last pending chunk holds byte `consumed - 1`.
   */
  #take(eventEnd: number, consumed: number): string | undefined {
    // The event is copied when it spans chunks (a view of its chunk otherwise), and decoded.
    const spans = eventEnd > (this.#parts[0]?.byteLength ?? 0);
    const bytes = concatFirst(this.#parts, eventEnd);
    this.#work.copied += (spans ? eventEnd : 0) + eventEnd;
    const last = this.#parts.at(-1);
    const keepFrom = (last?.byteLength ?? 0) - (this.#pending - consumed);
    this.#parts = last === undefined || keepFrom >= last.byteLength ? [] : [last.subarray(keepFrom)];
    this.#pending -= consumed;
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    return text.trim() === "" ? undefined : `${text.replace(/\r\n/g, "\n")}\n\n`;
  }
}

/** The first `n` bytes of `parts` as one array (a view of the first part when it holds them all). */
function concatFirst(parts: readonly Uint8Array[], n: number): Uint8Array {
  const first = parts[0];
  if (first === undefined || n === 0) return new Uint8Array(0);
  if (first.byteLength >= n) return first.subarray(0, n);
  const out = new Uint8Array(n);
  let at = 0;
  for (const part of parts) {
    const take = Math.min(part.byteLength, n - at);
    out.set(take === part.byteLength ? part : part.subarray(0, take), at);
    at += take;
    if (at === n) break;
  }
  return out;
}
