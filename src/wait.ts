import type { Clock, ClockTimer } from "./clock.js";
import { onAbort } from "./linked-signal.js";

/**
 * Waiting, shared by the worker, the job-API client and the management client: one wait/wake
 * primitive ({@link WaiterSet}), a sleep built on it, and the `Retry-After` header. Each caller
 * keeps its own back-off policy; these pieces are the same everywhere.
 */

/** How a wait ended. */
export type WaitEnd = "woken" | "timeout" | "aborted";

/** Where pending waits are kept: a {@link WaiterSet}'s set, or a {@link KeyedWaiters}' map (by `key`). */
interface WaitRoom<K> {
  add(key: K, end: (how: WaitEnd) => void): void;
  delete(key: K, end: (how: WaitEnd) => void): void;
}

/**
 * Waits on `ms`, `signal` and (when `room` is given) a wake, whichever comes first. Every end
 * goes through one function that removes all three (the timer, the signal's callback and the
 * entry in `room`), so a wait that times out or is aborted leaves nothing behind to be woken,
 * and a wake never walks a chain of old waits. One closure per wait (its end): the room, the
 * clock and the key are passed, not wrapped.
 */
function waitOn<K>(
  room: WaitRoom<K> | undefined,
  key: K,
  clock: Clock | undefined,
  ms: number | undefined,
  signal: AbortSignal | undefined,
): Promise<WaitEnd> {
  if (signal?.aborted) return Promise.resolve("aborted");
  return new Promise((resolve) => {
    let settled = false;
    let clockTimer: ClockTimer | undefined;
    let nodeTimer: ReturnType<typeof setTimeout> | undefined;
    let unsubscribe: (() => void) | undefined;
    const end = (how: WaitEnd): void => {
      if (settled) return;
      settled = true;
      room?.delete(key, end);
      if (clockTimer !== undefined) clock!.clearTimeout(clockTimer);
      if (nodeTimer !== undefined) clearTimeout(nodeTimer);
      unsubscribe?.();
      resolve(how);
    };
    room?.add(key, end);
    if (ms !== undefined) {
      if (clock === undefined) nodeTimer = setTimeout(end, ms, "timeout");
      else clockTimer = clock.setTimeout(() => end("timeout"), ms);
    }
    // One listener on the signal however many waits share it (a worker's jobs back off on one
    // give-up signal): a listener each would trip MaxListenersExceededWarning under load.
    if (signal !== undefined) unsubscribe = onAbort(signal, () => end("aborted"));
  });
}

/**
 * The one wait/wake primitive of the worker's loops: a set of waiters, each ended by
 * {@link wakeAll}, its own timeout or its signal, with one clean-up for all three. The take loop
 * (every slot busy), the job-stop poll (no job held) and a streaming job's outbox (over its buffer
 * budget) wait on one. However many waits time out, the set holds only the waits still pending.
 *
 * @example
 * const changes = new WaiterSet(clock);
 * await changes.wait(1_000, closing); // "woken" | "timeout" | "aborted"
 * changes.wakeAll();
 */
export class WaiterSet {
  readonly #waiters = new Set<(end: WaitEnd) => void>();
  readonly #clock: Clock | undefined;
  readonly #room: WaitRoom<undefined>;

  /** @param clock times the waits' `ms` (the worker's clock). @default real timers */
  constructor(clock?: Clock) {
    this.#clock = clock;
    const waiters = this.#waiters;
    this.#room = { add: (_key, end) => waiters.add(end), delete: (_key, end) => waiters.delete(end) };
  }

  /** How many waits are pending. */
  get size(): number {
    return this.#waiters.size;
  }

  /** Waits until {@link wakeAll}, `ms` (undefined: no timeout), or `signal` aborts. */
  wait(ms: number | undefined, signal?: AbortSignal): Promise<WaitEnd> {
    return waitOn(this.#room, undefined, this.#clock, ms, signal);
  }

  /** Ends every pending wait with "woken"; waits begun by their callers after this are not. */
  wakeAll(): void {
    for (const end of [...this.#waiters]) end("woken");
  }
}

/**
 * {@link WaiterSet} by key: each wait names what it waits for (a job id, a held poll, a worker),
 * and {@link wake} ends only that key's waits. It is the harness's one way to wait: a request held
 * on a job (`/runsync`, `/status-sync`, `/stream`, `waitForJob`), a held job-take and a held
 * job-stop poll. Timeout, abort and wake share {@link WaiterSet}'s one clean-up, and a key whose
 * last wait ended is dropped, so however many waits time out the map holds only pending ones.
 *
 * @example
 * const jobs = new KeyedWaiters<string>(realClock());
 * await jobs.wait("job-1", 30_000, hangUp); // "woken" | "timeout" | "aborted"
 * jobs.wake("job-1");
 */
export class KeyedWaiters<K> {
  readonly #byKey = new Map<K, Set<(end: WaitEnd) => void>>();
  readonly #clock: Clock | undefined;
  #size = 0;
  /** The map as {@link waitOn} sees it: made once, not once a wait. */
  readonly #room: WaitRoom<K> = {
    add: (key, end) => {
      let set = this.#byKey.get(key);
      if (set === undefined) {
        set = new Set();
        this.#byKey.set(key, set);
      }
      set.add(end);
      this.#size++;
    },
    delete: (key, end) => {
      const set = this.#byKey.get(key);
      if (set === undefined || !set.delete(end)) return;
      this.#size--;
      if (set.size === 0) this.#byKey.delete(key);
    },
  };

  /** @param clock times the waits' `ms`. @default real timers */
  constructor(clock?: Clock) {
    this.#clock = clock;
  }

  /** How many waits are pending, over every key. */
  get size(): number {
    return this.#size;
  }

  /** How many keys have a pending wait. */
  get keys(): number {
    return this.#byKey.size;
  }

  /** True while `key` has a pending wait. */
  has(key: K): boolean {
    return this.#byKey.has(key);
  }

  /** Waits until {@link wake} of `key` (or {@link wakeAll}), `ms` (undefined: no timeout), or `signal` aborts. */
  wait(key: K, ms: number | undefined, signal?: AbortSignal): Promise<WaitEnd> {
    return waitOn(this.#room, key, this.#clock, ms, signal);
  }

  /** Ends `key`'s pending waits with "woken"; true when there was one. */
  wake(key: K): boolean {
    const set = this.#byKey.get(key);
    if (set === undefined) return false;
    for (const end of [...set]) end("woken");
    return true;
  }

  /** Ends every pending wait with "woken". */
  wakeAll(): void {
    for (const set of [...this.#byKey.values()]) for (const end of [...set]) end("woken");
  }
}

/**
 * Resolves after `ms`, or early (with false) when `signal` aborts; true when the full time passed.
 * `clock` (the worker's, replaceable in tests) times it; @default real timers.
 */
export async function sleep(ms: number, signal?: AbortSignal, clock?: Clock): Promise<boolean> {
  return (await waitOn(undefined, undefined, clock, ms, signal)) === "timeout";
}

/** Options of {@link retryAfterMs}. */
export interface RetryAfterOptions {
  /** The current time, for an HTTP-date value. @default Date.now() */
  readonly nowMs?: number;
  /** Largest wait returned, ms. @default no cap */
  readonly capMs?: number;
}

/**
 * The wait a `Retry-After` header asks for, in ms: delta-seconds or an HTTP date (RFC 9110 §10.2.3);
 * undefined when absent or unreadable, so the caller falls back to its own back-off.
 */
export function retryAfterMs(
  header: string | readonly string[] | undefined,
  options: RetryAfterOptions = {},
): number | undefined {
  const value = (typeof header === "string" ? header : header?.[0])?.trim();
  if (value === undefined || value === "") return undefined;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(value)) ms = Math.round(Number(value) * 1_000);
  else {
    // An HTTP date names its day and month; without a letter it is garbage that Date.parse
    // would still read (e.g. "-3" as a year).
    const at = /[a-z]/i.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - (options.nowMs ?? Date.now()));
  }
  return options.capMs === undefined ? ms : Math.min(options.capMs, ms);
}
