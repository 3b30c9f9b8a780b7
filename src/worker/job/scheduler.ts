import type { RunHandle, RunJob } from "../runner/run.js";
import type { Runner } from "../runner/runner.js";

/**
 * Between the job board and the runner: a scheduler groups admitted jobs into runs of N ≥ 1 jobs
 * (docs/architecture.md, "A run of N ≥ 1 jobs") and holds the seats they run in; it keeps no
 * per-job state (each job's life is its ActiveJob's, active-job.ts). A plain handler's
 * {@link PlainScheduler} starts each job at once as a run of one; a batch handler's
 * BatchScheduler (batch-scheduler.ts) gathers jobs in a filling window and starts a batch when a
 * seat (of `concurrency`) is free. Both hand what they start to the {@link Runner}, which runs it
 * where the handler lives. The worker picks one at start (worker-parts.ts, createScheduler).
 */

/** A batch's seat, as a job that runs in it sees it. */
export interface Seat {
  readonly batchId: string;
  /** How many jobs the batch started with. */
  readonly size: number;
  /** On the worker's clock: when the batch started. */
  readonly startedAt: number;
  /**
   * Job `index` of the batch is let go (job-stop, its deadline, shutdown): its own signal fires and
   * the batch runs on for the others; once no job is wanted, the batch's signal fires and the
   * batch is hard-stopped past the grace.
   */
  letGo(index: number, reason: Error): void;
}

/** What a scheduler tells a job whose run started. */
export interface Launch {
  readonly run: RunHandle;
  /** The job's place in the run. */
  readonly index: number;
  /** The batch's seat, for a batch handler's job; undefined for a run of its own. */
  readonly seat: Seat | undefined;
}

/** A job as a scheduler sees it (ActiveJob implements it). */
export interface ScheduledJob {
  readonly id: string;
  /** What the runner runs of this job. */
  readonly runJob: RunJob;
  /**
   * Readies the job to wait for a seat: its input is validated alone (a bad one fails at once and
   * takes no seat). True: it now waits in the filling batch; false: it ended or left. Never rejects.
   */
  prepare(): Promise<boolean>;
  /** Its run started (the runner has called its `onLaunch`). */
  launch(launch: Launch): void;
}

/** When runs start: every member is implemented by both schedulers. */
export interface Scheduler {
  /** Whether a run can be ended by force (the runner's {@link Runner.canHardStop}). */
  readonly canHardStop: boolean;
  /** Takes a job; it is launched when its run starts (plain: at once, within this call). */
  admit(job: ScheduledJob): void;
  /** A job admitted but not launched leaves (stopped, shut down): it takes no seat any more. */
  withdraw(job: ScheduledJob): void;
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

/** A plain handler's scheduler: each job runs at once, a run of its own, and holds one slot. */
export class PlainScheduler implements Scheduler {
  readonly #runner: Runner;
  #concurrency = 1;

  constructor(runner: Runner) {
    this.#runner = runner;
  }

  get canHardStop(): boolean {
    return this.#runner.canHardStop;
  }

  admit(job: ScheduledJob): void {
    const runJob = job.runJob;
    const run = this.#runner.run({ batchId: undefined, jobs: [runJob], log: runJob.log });
    job.launch({ run, index: 0, seat: undefined });
  }

  /** A plain job is launched within {@link admit}: it never waits. */
  withdraw(_job: ScheduledJob): void {}

  setConcurrency(concurrency: number): void {
    this.#concurrency = concurrency;
  }

  /** A slot a job, reporting included: what the concurrency leaves after the jobs held. */
  room(held: number): number {
    return Math.max(0, this.#concurrency - held);
  }
}
