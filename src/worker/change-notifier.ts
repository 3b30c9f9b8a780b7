/**
 * Wakes the worker's loops when something they wait on changes: a slot frees up, a job starts,
 * the concurrency may have changed, or the worker closes. The take loop (all slots busy) and the
 * job-stop poll (no job running) wait on it instead of spinning.
 */
export class ChangeNotifier {
  readonly #closing: AbortSignal;
  #wake: (() => void) | undefined;

  /** @param closing aborting it ends every wait at once. */
  constructor(closing: AbortSignal) {
    this.#closing = closing;
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
      const timer = setTimeout(done, ms);
      const signal = this.#closing;
      function done(): void {
        clearTimeout(timer);
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
