import { RunletError } from "../../errors.js";
import { KeyedWaiters } from "../../wait.js";
import { type Clock, realClock } from "../clock.js";
import type { JobEntry } from "./job-entry.js";

const DONE: Promise<unknown> = Promise.resolve();

/**
 * Wake-ups for requests that wait on a job (`/runsync`, `/status-sync`, `/stream`, the OpenAI
 * routes, `waitForJob`), keyed by job id on the harness's one waiter ({@link KeyedWaiters}). Its
 * clock is the hold clock: real time by default (a client is holding a connection), never the
 * harness's job clock, which a test may have stopped.
 */
export class JobWaits {
  readonly #clock: Clock;
  /** Waits for a job's next change (`next`). */
  readonly #waits: KeyedWaiters<string>;
  /**
   * Waits for a job's end (`untilEnded`), woken only once the job is no longer live: a job handed
   * out and then finished would otherwise wake its waiters twice, and each wake re-arms a timer.
   */
  readonly #ends: KeyedWaiters<string>;
  readonly #lookup: (jobId: string) => JobEntry | undefined;
  #closed = false;

  /**
   * @param lookup finds a job by id (the store's table), for {@link untilEnded}.
   * @param clock times the waits. @default the real clock
   */
  constructor(lookup: (jobId: string) => JobEntry | undefined, clock: Clock = realClock()) {
    this.#lookup = lookup;
    this.#clock = clock;
    this.#waits = new KeyedWaiters(clock);
    this.#ends = new KeyedWaiters(clock);
  }

  /** Now on the hold clock, ms. */
  now(): number {
    return this.#clock.now();
  }

  /** How many waits are pending (for tests that hold the harness to its bounds). */
  get pending(): number {
    return this.#waits.size + this.#ends.size;
  }

  /** Wakes everything waiting on this job's next change, and on its end once it is no longer live. */
  notify(jobId: string): void {
    this.#waits.wake(jobId);
    if (!this.#ends.has(jobId)) return;
    const job = this.#lookup(jobId);
    if (job === undefined || !job.isLive()) this.#ends.wake(jobId);
  }

  /**
   * Resolves at the job's next change, after `timeoutMs`, when `signal` aborts, or when the harness
   * closes — whichever is first. Callers re-check the job after it resolves.
   */
  next(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    if (this.#closed || signal?.aborted === true || timeoutMs <= 0) return DONE;
    return this.#waits.wait(jobId, timeoutMs, signal);
  }

  /**
   * The one wait for a job to end: resolves with the job once it is no longer live (ended, or
   * deleted), or as it is when `timeoutMs` runs out, `signal` aborts or the harness closes;
   * undefined when no such job is remembered. The caller reads what happened from the job.
   */
  async untilEnded(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<JobEntry | undefined> {
    const until = this.#clock.now() + timeoutMs;
    for (;;) {
      const job = this.#lookup(jobId);
      if (job === undefined || !job.isLive()) return job;
      const left = until - this.#clock.now();
      if (left <= 0 || signal?.aborted === true || this.#closed) return job;
      await this.#ends.wait(jobId, left, signal);
    }
  }

  /** True once {@link closeAll} ran: waits resolve at once. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Wakes every waiter and makes later waits return at once. */
  closeAll(): void {
    this.#closed = true;
    this.#waits.wakeAll();
    this.#ends.wakeAll();
  }
}

/**
 * `Harness.waitForJob`: the job once it is terminal; throws `RUNLET_HARNESS_NO_JOB` when it is
 * unknown, `RUNLET_HARNESS_JOB_DELETED` when it was deleted before it ended, and
 * `RUNLET_HARNESS_WAIT_TIMEOUT` when it is still going after `timeoutMs` (or the harness closed).
 */
export async function untilTerminal(waits: JobWaits, jobId: string, timeoutMs: number): Promise<JobEntry> {
  const job = await waits.untilEnded(jobId, timeoutMs);
  if (job === undefined) {
    throw new RunletError("RUNLET_HARNESS_NO_JOB", `waitForJob: no job "${jobId}"`, { details: { jobId } });
  }
  if (job.status !== "IN_QUEUE" && job.status !== "IN_PROGRESS") return job;
  const details = { jobId, status: job.status, timeoutMs };
  if (job.deleted) {
    throw new RunletError(
      "RUNLET_HARNESS_JOB_DELETED",
      `waitForJob: job "${jobId}" was deleted while ${job.status}`,
      { details },
    );
  }
  throw new RunletError(
    "RUNLET_HARNESS_WAIT_TIMEOUT",
    `waitForJob: job "${jobId}" is still ${job.status} after ${timeoutMs} ms`,
    { details },
  );
}
