import type { JobEvent, JobEventListener } from "../jobs/job-events.js";

/**
 * Job events sorted by job: one subscription to the harness's job events while anyone watches,
 * and each event handed only to the watchers of its job, so a thousand open OpenAI streams do not
 * each look at every chunk of the others.
 */
export class JobFeed {
  readonly #subscribe: (listener: JobEventListener) => () => void;
  readonly #watchers = new Map<string, Set<JobEventListener>>();
  #unsubscribe: (() => void) | undefined;

  constructor(subscribe: (listener: JobEventListener) => () => void) {
    this.#subscribe = subscribe;
  }

  /** Calls `listener` for each event of `jobId` until the returned function is called. */
  watch(jobId: string, listener: JobEventListener): () => void {
    let set = this.#watchers.get(jobId);
    if (set === undefined) {
      set = new Set();
      this.#watchers.set(jobId, set);
    }
    set.add(listener);
    this.#unsubscribe ??= this.#subscribe((event) => this.#dispatch(event));
    return () => {
      const watchers = this.#watchers.get(jobId);
      if (watchers === undefined || !watchers.delete(listener)) return;
      if (watchers.size === 0) this.#watchers.delete(jobId);
      if (this.#watchers.size === 0) {
        this.#unsubscribe?.();
        this.#unsubscribe = undefined;
      }
    };
  }

  #dispatch(event: JobEvent): void {
    const set = this.#watchers.get(event.jobId);
    if (set === undefined) return;
    for (const listener of [...set]) listener(event);
  }
}
