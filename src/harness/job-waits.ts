import type { JobEntry } from "./job-entry.js";

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

/**
 * Resolves with the job once it is terminal (real time, for in-process callers such as
 * `Harness.waitForJob`); rejects when it is unknown, deleted first, or still going after `timeoutMs`.
 */
export async function untilTerminal(
  store: { readonly table: { get(id: string): JobEntry | undefined }; readonly waits: JobWaits },
  jobId: string,
  timeoutMs: number,
): Promise<JobEntry> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const job = store.table.get(jobId);
    if (job === undefined) throw new Error(`waitForJob: no job "${jobId}"`);
    if (job.status !== "IN_QUEUE" && job.status !== "IN_PROGRESS") return job;
    if (job.deleted) throw new Error(`waitForJob: job "${jobId}" was deleted while ${job.status}`);
    const left = until - Date.now();
    if (left <= 0 || store.waits.closed) {
      throw new Error(`waitForJob: job "${jobId}" is still ${job.status} after ${timeoutMs} ms`);
    }
    await store.waits.next(jobId, left);
  }
}
