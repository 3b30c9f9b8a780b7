import type { Clock } from "../clock.js";

/**
 * Wakes the worker's loops when something they wait on changes: a slot frees up, a job starts,
 * the concurrency may have changed, or the worker closes. The take loop (all slots busy) and the
 * job-stop poll (no job running) wait on it instead of spinning.
 */
export class ChangeNotifier {
  readonly #closing: AbortSignal;
  readonly #clock: Clock;
  #wake: (() => void) | undefined;

  /**
   * @param closing aborting it ends every wait at once.
   * @param clock times the waits' `ms` (the worker's clock: tests advance it instead of waiting).
   */
  constructor(closing: AbortSignal, clock: Clock) {
    this.#closing = closing;
    this.#clock = clock;
  }

  /** Ends every current wait. */
  notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Waits until the next notify(), `ms` passes, or the worker closes. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const clock = this.#clock;
      const timer = clock.setTimeout(done, ms);
      const signal = this.#closing;
      function done(): void {
        clock.clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
      const previous = this.#wake;
      this.#wake = () => {
        previous?.();
        done();
      };
    });
  }
}
