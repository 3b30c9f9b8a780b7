/**
 * The harness's notion of time. Job lifetimes (ttl, executionTimeout, result retention), webhook
 * retry spacing, heartbeat lapses and rate-limit windows all run on a {@link Clock}, so tests
 * replace minutes with a {@link ManualClock} they advance by hand. How long an HTTP request is held
 * open (long polls, `/runsync?wait=`) is always real time: a client on the other end is waiting.
 */

/** A handle returned by {@link Clock.setTimeout}. */
export interface ClockTimer {
  readonly id: number;
}

/** A source of time and one-shot timers. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once, `delayMs` from now. */
  setTimeout(fn: () => void, delayMs: number): ClockTimer;
  /** Cancels a timer; unknown or fired timers are ignored. */
  clearTimeout(timer: ClockTimer): void;
}

let nextRealId = 1;

/** The real clock: `Date.now()` and Node timers (unref'd, so a forgotten timer never keeps a process alive). */
export function realClock(): Clock {
  const timers = new Map<number, NodeJS.Timeout>();
  return {
    now: () => Date.now(),
    setTimeout(fn, delayMs) {
      const id = nextRealId++;
      const handle = setTimeout(
        () => {
          timers.delete(id);
          fn();
        },
        Math.max(0, delayMs),
      );
      handle.unref();
      timers.set(id, handle);
      return { id };
    },
    clearTimeout(timer) {
      const handle = timers.get(timer.id);
      if (handle !== undefined) clearTimeout(handle);
      timers.delete(timer.id);
    },
  };
}

interface PendingTimer {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/**
 * A clock that only moves when told to. `advance(ms)` fires every timer that falls due, in order of
 * due time (then creation), including timers those callbacks schedule within the advanced span.
 *
 * @example
 * const clock = new ManualClock();
 * await using h = await startHarness({ clock });
 * clock.advance(30 * 60_000); // every /run result retention has now elapsed
 */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  #timers = new Map<number, PendingTimer>();

  /** @param startMs the initial time, epoch ms. @default 1_700_000_000_000 */
  constructor(startMs = 1_700_000_000_000) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, delayMs: number): ClockTimer {
    const id = this.#nextId++;
    this.#timers.set(id, { id, at: this.#now + Math.max(0, delayMs), fn });
    return { id };
  }

  clearTimeout(timer: ClockTimer): void {
    this.#timers.delete(timer.id);
  }

  /** How many timers are waiting to fire. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`advance(ms) needs a finite ms ≥ 0, got ${ms}`);
    const target = this.#now + ms;
    for (;;) {
      let due: PendingTimer | undefined;
      for (const t of this.#timers.values()) {
        if (t.at <= target && (due === undefined || t.at < due.at || (t.at === due.at && t.id < due.id))) {
          due = t;
        }
      }
      if (due === undefined) break;
      this.#timers.delete(due.id);
      this.#now = Math.max(this.#now, due.at);
      due.fn();
    }
    this.#now = target;
  }
}

/** Tracks every timer one owner schedules on a clock, so `clearAll()` on close leaves none behind. */
export class TimerSet {
  readonly #clock: Clock;
  readonly #live = new Map<number, ClockTimer>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Schedules `fn` after `delayMs` on the clock. */
  set(fn: () => void, delayMs: number): ClockTimer {
    const timer = this.#clock.setTimeout(() => {
      this.#live.delete(timer.id);
      fn();
    }, delayMs);
    this.#live.set(timer.id, timer);
    return timer;
  }

  /** Cancels one timer (undefined is ignored). */
  clear(timer: ClockTimer | undefined): void {
    if (timer === undefined) return;
    this.#clock.clearTimeout(timer);
    this.#live.delete(timer.id);
  }

  /** Cancels every timer still pending. */
  clearAll(): void {
    for (const t of this.#live.values()) this.#clock.clearTimeout(t);
    this.#live.clear();
  }
}
