import type { ExecuteHooks } from "../../handler/execute.js";
import type { JobRunHandle, JobRunRequest, Runner } from "../runner/runner.js";

/**
 * Between the job board and the runner: a scheduler decides when a run of N ≥ 1 jobs starts
 * (docs/architecture.md, "A run of N ≥ 1 jobs"). A plain handler's {@link PlainScheduler} starts
 * each job at once, one job a slot; a batch handler's BatchScheduler (batch-scheduler.ts) gathers
 * jobs in a filling window and starts a batch when a seat (of `concurrency`) is free. Both hand
 * what they start to the {@link Runner}, which runs it where the handler lives. The worker picks
 * one at start (worker-parts.ts, createScheduler); ActiveJob and the job board use whichever it is.
 */

/** When runs start: every member is implemented by both schedulers. */
export interface Scheduler {
  /**
   * Takes a job; it runs when its run starts (plain: at once). The request's `onLaunch` is
   * called synchronously just before its handler can run.
   */
  run(request: JobRunRequest, hooks: ExecuteHooks): JobRunHandle;
  /**
   * The concurrency to schedule with from now on (the job board's, consulted between takes): a
   * plain handler's jobs at once, a batch handler's batches at once. A batch scheduler starts
   * the batches that now have a seat; this is the one call from outside that may start a run.
   */
  setConcurrency(concurrency: number): void;
  /**
   * How many more jobs the worker may take now, with `held` jobs held (running or reporting). A
   * pure query: it starts nothing and tells nobody.
   */
  room(held: number): number;
}

/** A plain handler's scheduler: each job runs at once on the runner, and holds one slot. */
export class PlainScheduler implements Scheduler {
  readonly #runner: Runner;
  #concurrency = 1;

  constructor(runner: Runner) {
    this.#runner = runner;
  }

  run(request: JobRunRequest, hooks: ExecuteHooks): JobRunHandle {
    return this.#runner.run(request, hooks);
  }

  setConcurrency(concurrency: number): void {
    this.#concurrency = concurrency;
  }

  /** A slot a job, reporting included: what the concurrency leaves after the jobs held. */
  room(held: number): number {
    return Math.max(0, this.#concurrency - held);
  }
}
