import { MAX_STREAM_CHUNK_BYTES } from "../protocol/limits.js";
import { jsonStringBytes } from "./slice-text.js";

/** Room kept free in a merged chunk for its metrics, so a merged string is never split again. */
const METRICS_ALLOWANCE_BYTES = 4_096;

/** Options of a {@link StreamCoalescer}. */
export interface StreamCoalescerOptions {
  /** How long the first string of a batch may wait for more before the batch is released, in ms. */
  readonly windowMs: number;
  /**
   * Largest JSON size of a merged string, in bytes (quotes and escapes counted). A single string
   * larger than this passes through alone.
   * @default MAX_STREAM_CHUNK_BYTES - 4096 (1 MiB less room for metrics)
   */
  readonly maxItemBytes?: number;
  /** The clock, in ms since any fixed origin. @default Date.now */
  readonly now?: () => number;
}

/**
 * Merges consecutive string items of a stream (e.g. tokens) into fewer, larger items, so a fast
 * generator does not cost one post per token. Pure: it never sets a timer itself. The owner
 * passes every yielded item to `push`, posts what comes back in order, arms a timer for `dueAt()`,
 * calls `poll()` when it fires, and `flush()` when the generator ends.
 *
 * Any non-string item flushes the batch first, so the order of values is kept. Merged strings
 * are concatenated: a reader sees fewer, longer strings whose concatenation is unchanged.
 *
 * @example
 * const c = new StreamCoalescer({ windowMs: 20 });
 * for await (const token of gen) for (const item of c.push(token)) enqueue(item);
 * for (const item of c.flush()) enqueue(item);
 */
export class StreamCoalescer {
  readonly #windowMs: number;
  readonly #maxContentBytes: number;
  readonly #now: () => number;
  #parts: string[] = [];
  #contentBytes = 0;
  #openedAt = 0;

  constructor(options: StreamCoalescerOptions) {
    const maxItemBytes = options.maxItemBytes ?? MAX_STREAM_CHUNK_BYTES - METRICS_ALLOWANCE_BYTES;
    if (!Number.isFinite(options.windowMs) || options.windowMs < 0) {
      throw new RangeError(`windowMs must be a number ≥ 0, got ${options.windowMs}`);
    }
    if (!Number.isInteger(maxItemBytes) || maxItemBytes < 3) {
      throw new RangeError(`maxItemBytes must be an integer ≥ 3, got ${maxItemBytes}`);
    }
    this.#windowMs = options.windowMs;
    this.#maxContentBytes = maxItemBytes - 2; // the merged string's quotes
    this.#now = options.now ?? Date.now;
  }

  /** How many strings wait in the current batch. */
  get pendingCount(): number {
    return this.#parts.length;
  }

  /** When the current batch must be released (by the injected clock), or undefined when none waits. */
  dueAt(): number | undefined {
    return this.#parts.length === 0 ? undefined : this.#openedAt + this.#windowMs;
  }

  /** Takes the next yielded item; returns the items ready to post now, in order. */
  push(item: unknown): unknown[] {
    const ready = this.poll();
    if (typeof item !== "string") {
      ready.push(...this.flush(), item);
      return ready;
    }
    const bytes = jsonStringBytes(item);
    if (bytes > this.#maxContentBytes) {
      ready.push(...this.flush(), item);
      return ready;
    }
    if (this.#contentBytes + bytes > this.#maxContentBytes) ready.push(...this.flush());
    if (this.#parts.length === 0) this.#openedAt = this.#now();
    this.#parts.push(item);
    this.#contentBytes += bytes;
    return ready;
  }

  /** Releases the batch if its window has passed by the clock; else returns nothing. */
  poll(): unknown[] {
    if (this.#parts.length === 0 || this.#now() < this.#openedAt + this.#windowMs) return [];
    return this.flush();
  }

  /** Releases the batch now (at the end of the stream, or before back-pressure waits). */
  flush(): unknown[] {
    if (this.#parts.length === 0) return [];
    // A batch of one stays the same string value; join("") of one part is that part anyway.
    const merged = this.#parts.length === 1 ? this.#parts[0] : this.#parts.join("");
    this.#parts = [];
    this.#contentBytes = 0;
    return [merged];
  }
}
