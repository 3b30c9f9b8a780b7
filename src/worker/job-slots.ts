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
 * main thread is the only writer; a write is a few synchronous stores, so a handler cannot block
 * the main thread in the middle of one. The thread's side of the layout is plain JavaScript in
 * heartbeat.ts's thread source, which receives {@link SLOT_LAYOUT} rather than repeating it.
 */

/** Byte offsets within a slot (Int32 fields at multiples of 4, Float64 fields at multiples of 8). */
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
  /** Float64: epoch ms at which the watchdog acts. */
  watchAt: 16,
  /** Float64: the job's time limit, ms (for the failure the watchdog posts). */
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
  #f64: Float64Array;
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
    this.#f64 = new Float64Array(this.#buffer);
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
      const generation = this.#i32[(base + SLOT_LAYOUT.generation) >> 2]! + 1;
      this.#i32[(base + SLOT_LAYOUT.generation) >> 2] = generation;
      const room = this.#u8.subarray(base + SLOT_LAYOUT.id, base + SLOT_LAYOUT.slotBytes);
      const { read, written } = encoder.encodeInto(id, room);
      let flags = SLOT_FLAGS.used | SLOT_FLAGS.listed;
      if (read === id.length) this.#i32[(base + SLOT_LAYOUT.idBytes) >> 2] = written;
      else {
        flags |= SLOT_FLAGS.longId;
        this.#send({ type: "long-id", slot, generation, id });
      }
      this.#i32[(base + SLOT_LAYOUT.flags) >> 2] = flags;
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
    this.#f64[(base + SLOT_LAYOUT.watchAt) >> 3] = atMs;
    this.#f64[(base + SLOT_LAYOUT.timeoutMs) >> 3] = timeoutMs;
    const flags = this.#i32[(base + SLOT_LAYOUT.flags) >> 2]! & ~SLOT_FLAGS.streaming;
    this.#i32[(base + SLOT_LAYOUT.flags) >> 2] =
      flags | SLOT_FLAGS.watched | (streaming ? SLOT_FLAGS.streaming : 0);
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
    this.#i32[(base + SLOT_LAYOUT.flags) >> 2] = 0;
    this.#close(base);
    this.#free.push(slot);
  }

  #clearFlag(id: string, flag: number): void {
    const slot = this.#slotOf.get(id);
    if (slot === undefined) return;
    const base = this.#open(slot);
    const at = (base + SLOT_LAYOUT.flags) >> 2;
    this.#i32[at] = this.#i32[at]! & ~flag;
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
    this.#f64 = new Float64Array(buffer);
    this.#u8 = new Uint8Array(buffer);
    for (let slot = 2 * capacity - 1; slot >= capacity; slot--) this.#free.push(slot);
    this.#send({ type: "slots", buffer });
  }
}
