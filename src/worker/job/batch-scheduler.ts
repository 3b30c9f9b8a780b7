import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import { RunletError } from "../../errors.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { settle } from "../../task-sink.js";
import type { BatchWrapper } from "../events.js";
import type { Run, RunHandle } from "../runner/run.js";
import type { Runner } from "../runner/runner.js";
import { armHardStop } from "./job-clock.js";
import type { ScheduledJob, Scheduler, Seat } from "./scheduler.js";

/**
 * Dynamic batching (docs/handler.md, "Batching"): a Scheduler that gathers the jobs it is given into
 * batches and runs each batch as one run (one call of the batch handler). It holds the filling
 * batch and the seats; each job keeps its own life in its ActiveJob (active-job.ts), waiting for a
 * seat included, so its deadline, job-stop, progress, result and offload work as for a single job:
 * the job's run starts when its batch starts and it settles with its place in the batch's
 * outputs, or at once when the job is let go (stopped, timed out, shut down) while its batch runs on.
 *
 * The first job of an empty batch opens a window of `maxWaitMs`; the batch runs when it is full or
 * the window has closed, and a batch seat (of `concurrency`) is free; until then it keeps filling.
 * Only one batch fills at a time, so the worker's room for new jobs is what that batch lacks.
 */

/** What {@link BatchScheduler} needs from the worker. */
export interface BatchSchedulerOptions {
  /** A definition with `batch` set. */
  readonly definition: HandlerDefinition;
  /** Where the batches run (in-process or isolation threads); it owns setup's state. */
  readonly runner: Runner;
  /** The worker's clock: the window and the hard stop's grace run on it. */
  readonly clock: Clock;
  readonly log: Logger;
  /** Told when an in-process batch ignores its aborted signal past the grace (the worker must be replaced). */
  readonly runaway: (jobId: string) => void;
  /**
   * Told when the room for new jobs may have grown without a job ending (a batch started or
   * ended, a job left the filling batch): the take loop waits on it.
   */
  readonly roomChanged: () => void;
  /** Launches each batch: telemetry's seam (events.ts, `wrapBatch`). Absent: as is. */
  readonly wrapBatch?: BatchWrapper;
}

/** A seat: one running batch. */
interface BatchSeat extends Seat {
  readonly run: RunHandle;
  readonly firstJobId: string;
  /** Jobs not yet let go: when none is left, the batch's signal fires. */
  wanted: number;
  hardStopTimer: ClockTimer | undefined;
}

/** A Scheduler that runs its jobs in batches on a {@link Runner}. */
export class BatchScheduler implements Scheduler {
  readonly #options: BatchSchedulerOptions;
  readonly #maxSize: number;
  readonly #maxWaitMs: number;
  /** The filling batch. */
  #pending: ScheduledJob[] = [];
  #window: ClockTimer | undefined;
  #windowClosed = false;
  /** Jobs being validated: each holds a seat until it joins or fails. */
  #validating = 0;
  readonly #running = new Set<BatchSeat>();
  #concurrency = 1;
  #batches = 0;
  // Web Crypto's global, not node:crypto: that module is not loaded with the worker (docs/benchmarks.md, "Cold start").
  readonly #idPrefix = globalThis.crypto.randomUUID().slice(0, 8);

  constructor(options: BatchSchedulerOptions) {
    const batch = options.definition.batch;
    if (batch === undefined)
      throw new RunletError("RUNLET_HANDLER_INVALID", "BatchScheduler needs a batch handler");
    this.#options = options;
    this.#maxSize = batch.maxSize;
    this.#maxWaitMs = batch.maxWaitMs;
  }

  get canHardStop(): boolean {
    return this.#options.runner.canHardStop;
  }

  /**
   * `concurrency` is the number of batches that may run at once (the handler's `concurrency`, as
   * the job board holds it): a filling batch that is due and now has a seat starts.
   */
  setConcurrency(concurrency: number): void {
    this.#concurrency = concurrency;
    this.#maybeLaunch();
  }

  /**
   * How many more jobs the worker may take now: what the filling batch lacks, whatever the jobs
   * held (the batches running hold theirs). A pure query.
   */
  room(_held: number): number {
    return Math.max(0, this.#maxSize - this.#pending.length - this.#validating);
  }

  /** The job validates its input alone, then waits in the filling batch. */
  admit(job: ScheduledJob): void {
    this.#validating += 1;
    const log = this.#options.log;
    // prepare() never rejects; should it, the seat is given back all the same.
    const waits = job.prepare().catch((err: unknown) => {
      log.error({ err, jobId: job.id }, "admitting this job to a batch failed");
      return false;
    });
    settle(
      waits.then((joins) => this.#prepared(job, joins)),
      (err) => log.error({ err, jobId: job.id }, "a job's joining its batch failed"),
    );
  }

  #prepared(job: ScheduledJob, waits: boolean): void {
    // Even when it failed: a seat counted as validating for ever would shrink the worker's room
    // for the rest of its life.
    this.#validating -= 1;
    if (!waits) {
      this.#roomChanged();
      return;
    }
    this.#pending.push(job);
    if (this.#pending.length === 1) this.#openWindow();
    this.#maybeLaunch();
  }

  withdraw(job: ScheduledJob): void {
    const at = this.#pending.indexOf(job);
    if (at < 0) return;
    this.#pending.splice(at, 1);
    if (this.#pending.length === 0) this.#closeWindow();
    this.#roomChanged();
  }

  #openWindow(): void {
    this.#windowClosed = false;
    this.#window = this.#options.clock.setTimeout(() => {
      this.#window = undefined;
      this.#windowClosed = true;
      this.#maybeLaunch();
    }, this.#maxWaitMs);
  }

  #closeWindow(): void {
    if (this.#window !== undefined) this.#options.clock.clearTimeout(this.#window);
    this.#window = undefined;
    this.#windowClosed = false;
  }

  #maybeLaunch(): void {
    while (
      this.#pending.length > 0 &&
      (this.#pending.length >= this.#maxSize || this.#windowClosed) &&
      this.#running.size < this.#concurrency
    ) {
      const jobs = this.#pending.splice(0, this.#maxSize);
      if (this.#pending.length === 0) this.#closeWindow();
      this.#launch(jobs);
    }
  }

  #launch(jobs: ScheduledJob[]): void {
    this.#batches += 1;
    const batchId = `${this.#idPrefix}-${this.#batches}`;
    const log = this.#options.log.child({ batchId });
    const startedAt = this.#options.clock.now();
    log.debug({ size: jobs.length, jobIds: jobs.map((job) => job.id) }, "running a batch");
    // The runner calls each job's onLaunch before the handler can run (an in-process batch's
    // handler may block the thread from its first line).
    const run = this.#run({ batchId, jobs: jobs.map((job) => job.runJob), log });
    const seat: BatchSeat = {
      batchId,
      size: jobs.length,
      startedAt,
      run,
      firstJobId: jobs[0]?.id ?? batchId,
      wanted: jobs.length,
      hardStopTimer: undefined,
      letGo: (index, reason) => this.#letGo(seat, index, reason),
    };
    this.#running.add(seat);
    for (const [index, job] of jobs.entries()) job.launch({ run, index, seat });
    // A runner's outcomes never reject; each job takes its own outcome from them.
    settle(
      run.outcomes.finally(() => {
        this.#running.delete(seat);
        if (seat.hardStopTimer !== undefined) this.#options.clock.clearTimeout(seat.hardStopTimer);
        this.#maybeLaunch();
        this.#roomChanged();
      }),
      (err) => log.error({ err }, "ending a batch's seat failed"),
    );
    // The filling batch is empty again: the take loop may ask for a whole batch.
    this.#roomChanged();
  }

  /** Starts a batch on the runner, through telemetry's seam when there is one. */
  #run(run: Run): RunHandle {
    const start = (r: Run) => this.#options.runner.run(r);
    return this.#options.wrapBatch === undefined ? start(run) : this.#options.wrapBatch(run, start);
  }

  /** Job `index` leaves its batch, which runs on for the others; the last one lets the batch go. */
  #letGo(seat: BatchSeat, index: number, reason: Error): void {
    seat.run.abort(reason, index);
    seat.wanted -= 1;
    this.#roomChanged();
    if (seat.wanted > 0) return;
    // No job of the batch is still wanted: fire its signal, and hard-stop it if it runs on past the grace.
    const { definition, clock, log, runaway } = this.#options;
    seat.run.abort(reason);
    seat.hardStopTimer = armHardStop({
      clock,
      graceMs: definition.hardStopGraceMs,
      log,
      message: "the batch handler ignored its aborted signal; hard-stopping the batch",
      fields: { batchId: seat.batchId },
      stillRuns: () => this.#running.has(seat),
      stop: () => seat.run.hardStop(),
      // In-process nothing can end the call: the worker stops so the platform replaces it.
      ranAway: () => runaway(seat.firstJobId),
    });
  }

  #roomChanged(): void {
    this.#options.roomChanged();
  }
}
