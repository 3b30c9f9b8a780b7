/**
 * The jobs the heartbeat thread must know of, in memory the main thread and that thread share.
 *
 * The pings name the jobs in progress (docs/protocol.md, "Heartbeat"), and the watchdog needs each in-process
 * job's hard-stop time, both known to the thread before a handler can block the main thread.
 * Telling the thread by `postMessage` cost a wake-up of the thread and a lock handed between the
 * two per message, two to four messages a job: about a fifth of a worker's busy CPU on trivial
 * jobs (docs/benchmarks.md, "Where the time goes"). Written here instead, a job costs a few stores
 * and no system call; the thread reads the table when it pings and when its watchdog looks.
 *
 * Layout: a SharedArrayBuffer of fixed-size slots, one per job held. Each slot is guarded by a
 * sequence number (a seqlock): the writer makes it odd before it writes and even after, and the
 * reader keeps a slot's fields only when the number was even and unchanged across its read. The
 * main thread is the only writer ({@link JobSlots}); a write is a few synchronous stores, so a
 * handler cannot block the main thread in the middle of one. The heartbeat thread is the only
 * reader ({@link JobSlotReader}, below); every number field is read and written with `Atomics`.
 */

/** Byte offsets within a slot (Int32 fields at multiples of 4, BigInt64 fields at multiples of 8). */
export const SLOT_LAYOUT = Object.freeze({
  /** Bytes per slot. */
  slotBytes: 256,
  /** Int32: the seqlock's sequence number (odd while the main thread writes). */
  seq: 0,
  /** Int32: {@link SLOT_FLAGS}. */
  flags: 4,
  /** Int32: the id's UTF-8 length when stored in the slot. */
  idBytes: 8,
  /** Int32: bumped each time the slot is given to a job (matches a long id's message to its slot). */
  generation: 12,
  /** BigInt64: epoch ms at which the watchdog acts. */
  watchAt: 16,
  /** BigInt64: the job's time limit, ms (for the failure the watchdog posts). */
  timeoutMs: 24,
  /** The id's UTF-8 bytes, up to the end of the slot. */
  id: 32,
});

/** Bits of a slot's flags. */
export const SLOT_FLAGS = Object.freeze({
  /** The slot holds a job. */
  used: 1,
  /** The pings name the job (cleared when job-stop named it: the platform no longer counts it). */
  listed: 2,
  /** The watchdog watches the job. */
  watched: 4,
  /** The job streams: the watchdog's failure is posted with `isStream=true`. */
  streaming: 8,
  /** The id is longer than a slot holds: it came to the thread in a `long-id` message. */
  longId: 16,
});

/** How many UTF-8 bytes of an id a slot holds. */
export const SLOT_ID_BYTES = SLOT_LAYOUT.slotBytes - SLOT_LAYOUT.id;

/** What the main thread must tell the heartbeat thread by message (rare: table growth, very long ids). */
export type SlotMessage =
  | { readonly type: "slots"; readonly buffer: SharedArrayBuffer }
  | { readonly type: "long-id"; readonly slot: number; readonly generation: number; readonly id: string };

const encoder = new TextEncoder();

/** The main thread's side of the table: the only writer. */
export class JobSlots {
  #buffer: SharedArrayBuffer;
  #i32: Int32Array;
  #i64: BigInt64Array;
  #u8: Uint8Array;
  readonly #slotOf = new Map<string, number>();
  #free: number[];
  readonly #send: (message: SlotMessage) => void;

  /**
   * @param send delivers a message to the thread (a grown table, a long id); called rarely.
   * @param capacity slots to start with; the table doubles when a job finds none free.
   */
  constructor(send: (message: SlotMessage) => void, capacity = 64) {
    this.#send = send;
    this.#buffer = new SharedArrayBuffer(capacity * SLOT_LAYOUT.slotBytes);
    this.#i32 = new Int32Array(this.#buffer);
    this.#i64 = new BigInt64Array(this.#buffer);
    this.#u8 = new Uint8Array(this.#buffer);
    this.#free = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
  }

  /** The shared memory, for the thread's workerData. */
  get buffer(): SharedArrayBuffer {
    return this.#buffer;
  }

  /** A job is held: the pings name it from now on. A second add of the same id does nothing. */
  add(id: string): void {
    if (this.#slotOf.has(id)) return;
    if (this.#free.length === 0) this.#grow();
    const slot = this.#free.pop()!;
    this.#slotOf.set(id, slot);
    const base = this.#open(slot);
    try {
      const generation = Atomics.add(this.#i32, (base + SLOT_LAYOUT.generation) >> 2, 1) + 1;
      const room = this.#u8.subarray(base + SLOT_LAYOUT.id, base + SLOT_LAYOUT.slotBytes);
      const { read, written } = encoder.encodeInto(id, room);
      let flags = SLOT_FLAGS.used | SLOT_FLAGS.listed;
      if (read === id.length) Atomics.store(this.#i32, (base + SLOT_LAYOUT.idBytes) >> 2, written);
      else {
        flags |= SLOT_FLAGS.longId;
        this.#send({ type: "long-id", slot, generation, id });
      }
      Atomics.store(this.#i32, (base + SLOT_LAYOUT.flags) >> 2, flags);
    } finally {
      this.#close(base);
    }
  }

  /** The pings stop naming the job (job-stop named it), though it still holds its slot. */
  unlist(id: string): void {
    this.#clearFlag(id, SLOT_FLAGS.listed);
  }

  /** Arms the watchdog for a job: at `atMs` the thread posts its timeout failure and ends the process. */
  watch(id: string, atMs: number, timeoutMs: number, streaming: boolean): void {
    const slot = this.#slotOf.get(id);
    if (slot === undefined) return;
    const base = this.#open(slot);
    Atomics.store(this.#i64, (base + SLOT_LAYOUT.watchAt) >> 3, BigInt(Math.ceil(atMs)));
    Atomics.store(this.#i64, (base + SLOT_LAYOUT.timeoutMs) >> 3, BigInt(Math.ceil(timeoutMs)));
    const at = (base + SLOT_LAYOUT.flags) >> 2;
    const flags = Atomics.load(this.#i32, at) & ~SLOT_FLAGS.streaming;
    Atomics.store(this.#i32, at, flags | SLOT_FLAGS.watched | (streaming ? SLOT_FLAGS.streaming : 0));
    this.#close(base);
  }

  /** Disarms the watchdog for a job. */
  unwatch(id: string): void {
    this.#clearFlag(id, SLOT_FLAGS.watched);
  }

  /** The job is held no more: its slot is free. */
  remove(id: string): void {
    const slot = this.#slotOf.get(id);
    if (slot === undefined) return;
    this.#slotOf.delete(id);
    const base = this.#open(slot);
    Atomics.store(this.#i32, (base + SLOT_LAYOUT.flags) >> 2, 0);
    this.#close(base);
    this.#free.push(slot);
  }

  #clearFlag(id: string, flag: number): void {
    const slot = this.#slotOf.get(id);
    if (slot === undefined) return;
    const base = this.#open(slot);
    const at = (base + SLOT_LAYOUT.flags) >> 2;
    Atomics.and(this.#i32, at, ~flag);
    this.#close(base);
  }

  /**
   * Starts a write to a slot (its sequence number turns odd, so the thread does not keep what it
   * reads meanwhile) and returns the slot's byte offset; {@link #close} ends it. A few plain
   * stores go between the two, with no call that could leave the number odd.
   */
  #open(slot: number): number {
    const base = slot * SLOT_LAYOUT.slotBytes;
    Atomics.add(this.#i32, (base + SLOT_LAYOUT.seq) >> 2, 1);
    return base;
  }

  #close(base: number): void {
    Atomics.add(this.#i32, (base + SLOT_LAYOUT.seq) >> 2, 1);
  }

  /** Doubles the table: the thread reads the old one, unchanged from here on, until the new one reaches it. */
  #grow(): void {
    const capacity = this.#buffer.byteLength / SLOT_LAYOUT.slotBytes;
    const buffer = new SharedArrayBuffer(2 * capacity * SLOT_LAYOUT.slotBytes);
    new Uint8Array(buffer).set(this.#u8);
    this.#buffer = buffer;
    this.#i32 = new Int32Array(buffer);
    this.#i64 = new BigInt64Array(buffer);
    this.#u8 = new Uint8Array(buffer);
    for (let slot = 2 * capacity - 1; slot >= capacity; slot--) this.#free.push(slot);
    this.#send({ type: "slots", buffer });
  }
}

/** A job as the heartbeat thread reads it from the table. */
export interface SlotJob {
  readonly id: string;
  /** {@link SLOT_FLAGS} bits. */
  readonly flags: number;
  /** Epoch ms at which the watchdog acts (when {@link SLOT_FLAGS.watched}). */
  readonly watchAt: number;
  readonly timeoutMs: number;
}

/** How often a reader retries a slot the writer keeps rewriting before leaving it for the next read. */
const READ_ATTEMPTS = 100;
const decoder = new TextDecoder();

/** The heartbeat thread's side of the table: the only reader. */
export class JobSlotReader {
  #i32: Int32Array;
  #i64: BigInt64Array;
  #u8: Uint8Array;
  #count: number;
  /** Ids longer than a slot holds, by slot, with the generation they belong to. */
  readonly #longIds = new Map<number, { readonly generation: number; readonly id: string }>();

  constructor(buffer: SharedArrayBuffer) {
    this.#i32 = new Int32Array(buffer);
    this.#i64 = new BigInt64Array(buffer);
    this.#u8 = new Uint8Array(buffer);
    this.#count = buffer.byteLength / SLOT_LAYOUT.slotBytes;
  }

  /** Applies a message from the writer (a grown table, a long id). */
  receive(message: SlotMessage): void {
    if (message.type === "slots") {
      this.#i32 = new Int32Array(message.buffer);
      this.#i64 = new BigInt64Array(message.buffer);
      this.#u8 = new Uint8Array(message.buffer);
      this.#count = message.buffer.byteLength / SLOT_LAYOUT.slotBytes;
    } else {
      this.#longIds.set(message.slot, { generation: message.generation, id: message.id });
    }
  }

  /** Every job in the table now. */
  jobs(): SlotJob[] {
    const out: SlotJob[] = [];
    for (let slot = 0; slot < this.#count; slot++) {
      const job = this.#read(slot);
      if (job !== undefined) out.push(job);
    }
    return out;
  }

  /**
   * One slot under its seqlock: its fields are kept only when the sequence number was even and
   * unchanged across the read. Undefined for a free slot, a long id whose message has not arrived,
   * or a slot the main thread kept rewriting (it is not stuck, so it is read next time).
   */
  #read(slot: number): SlotJob | undefined {
    const base = slot * SLOT_LAYOUT.slotBytes;
    const seqAt = (base + SLOT_LAYOUT.seq) >> 2;
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const seq = Atomics.load(this.#i32, seqAt);
      if (seq % 2 === 1) continue;
      const flags = Atomics.load(this.#i32, (base + SLOT_LAYOUT.flags) >> 2);
      if ((flags & SLOT_FLAGS.used) === 0) {
        if (Atomics.load(this.#i32, seqAt) === seq) return undefined;
        continue;
      }
      const generation = Atomics.load(this.#i32, (base + SLOT_LAYOUT.generation) >> 2);
      const idBytes = Atomics.load(this.#i32, (base + SLOT_LAYOUT.idBytes) >> 2);
      const length = Math.max(0, Math.min(idBytes, SLOT_ID_BYTES));
      // TextDecoder reads no shared memory: copy the bytes out first (checked by the seqlock).
      const raw =
        (flags & SLOT_FLAGS.longId) === 0
          ? this.#u8.slice(base + SLOT_LAYOUT.id, base + SLOT_LAYOUT.id + length)
          : undefined;
      const watchAt = Number(Atomics.load(this.#i64, (base + SLOT_LAYOUT.watchAt) >> 3));
      const timeoutMs = Number(Atomics.load(this.#i64, (base + SLOT_LAYOUT.timeoutMs) >> 3));
      if (Atomics.load(this.#i32, seqAt) !== seq) continue;
      let id: string;
      if (raw !== undefined) id = decoder.decode(raw);
      else {
        const long = this.#longIds.get(slot);
        if (long === undefined || long.generation !== generation) return undefined;
        id = long.id;
      }
      return { id, flags, watchAt, timeoutMs };
    }
    return undefined;
  }
}
