/**
 * The harness's clock: the shared {@link Clock} (src/clock.ts, also used by the worker), plus a
 * set that tracks one owner's timers so close() leaves none behind.
 */
import type { Clock, ClockTimer } from "../clock.js";

export { type Clock, type ClockTimer, ManualClock, type RealClockOptions, realClock } from "../clock.js";

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
