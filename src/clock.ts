/**
 * A notion of time that tests can replace, shared by the harness and the worker (neither imports
 * the other). The harness runs job lifetimes, webhook retry spacing, heartbeat lapses and
 * rate-limit windows on a {@link Clock}; the worker runs its poll pacing, job deadlines and
 * back-off sleeps on one. Tests replace minutes with a {@link ManualClock} they advance by hand.
 * How long an HTTP request is held open (long polls, `/runsync?wait=`) is always real time: a
 * client on the other end is waiting.
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

/** Options of {@link realClock}. */
export interface RealClockOptions {
  /**
   * Unref each timer, so a forgotten one never keeps a process alive (the harness). The worker
   * keeps its timers ref'd: a back-off sleep may be all that keeps `runlet start` running.
   * @default true
   */
  readonly unref?: boolean;
}

/** A real clock's timer: the Node timer it wraps, so clearing needs no lookup. */
class RealTimer implements ClockTimer {
  readonly id: number;
  readonly handle: ReturnType<typeof setTimeout>;
  readonly owner: object;
  constructor(id: number, handle: ReturnType<typeof setTimeout>, owner: object) {
    this.id = id;
    this.handle = handle;
    this.owner = owner;
  }
}

/** The real clock: `Date.now()` and Node timers. */
export function realClock(options: RealClockOptions = {}): Clock {
  const unref = options.unref ?? true;
  const clock: Clock = {
    now: () => Date.now(),
    setTimeout(fn, delayMs) {
      const handle = setTimeout(fn, Math.max(0, delayMs));
      if (unref) handle.unref();
      return new RealTimer(nextRealId++, handle, clock);
    },
    clearTimeout(timer) {
      // A timer of another clock is not this one's to clear.
      if (timer instanceof RealTimer && timer.owner === clock) clearTimeout(timer.handle);
    },
  };
  return clock;
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
