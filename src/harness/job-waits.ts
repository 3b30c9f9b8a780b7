/**
 * Wake-ups for requests that wait on a job (`/runsync`, `/status-sync`, `/stream`, `waitForJob`).
 * Waits are real time (a client is holding a connection), never the harness clock.
 */
export class JobWaits {
  readonly #waiters = new Map<string, Set<() => void>>();
  #closed = false;

  /** Wakes everything waiting on this job. */
  notify(jobId: string): void {
    const set = this.#waiters.get(jobId);
    if (set === undefined) return;
    this.#waiters.delete(jobId);
    for (const wake of set) wake();
  }

  /**
   * Resolves at the job's next change, after `timeoutMs`, when `signal` aborts, or when the harness
   * closes — whichever is first. Callers re-check the job after it resolves.
   */
  next(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || signal?.aborted === true || timeoutMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.#waiters.get(jobId);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(jobId, set);
      }
      const wake = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", wake);
        this.#waiters.get(jobId)?.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, timeoutMs);
      signal?.addEventListener("abort", wake, { once: true });
      set.add(wake);
    });
  }

  /** True once {@link closeAll} ran: waits resolve at once. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Wakes every waiter and makes later waits return at once. */
  closeAll(): void {
    this.#closed = true;
    const all = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const set of all) for (const wake of set) wake();
  }
}
