import type { DeliveredJob } from "../../protocol/index.js";
import { addRecent } from "../../recent-set.js";
import { settle } from "../../task-sink.js";
import { WaiterSet } from "../../wait.js";
import { ActiveJob } from "./active-job.js";
import { initialConcurrency, nextConcurrency } from "./concurrency.js";
import { failureBody } from "./failure-body.js";
import { type JobDeps, openOutbox } from "./job-deps.js";

/**
 * The jobs a worker holds (running, or still being reported) and its slots: the take loop asks it
 * how many slots are free and hands it each answer's jobs, the job-stop poll hands it the ids to
 * stop, shutdown reads what is left. Each job keeps its own heartbeat slot (active-job.ts).
 */

/** A delivered item that is not a valid job. */
export interface BadJob {
  /** Its id, when it had a usable one (the worker then fails that job with `reason`). */
  readonly id: string | undefined;
  readonly reason: string;
}

/**
 * How many ids {@link JobBoard.stop} keeps when it does not hold the job (yet): a job-stop answer
 * and the take answer that hands out the same job come on two connections, and the stop can be
 * read first. The oldest is forgotten past this bound (a stop for a job that already ended adds
 * one too, and nothing else removes those).
 */
export const EARLY_STOPS_KEPT = 256;

/** The jobs a worker holds, and its slots. */
export class JobBoard {
  readonly #deps: JobDeps;
  readonly #jobs = new Map<string, ActiveJob>();
  /** Reports of jobs failed without being run (bad, or more than the take asked for); shutdown waits for them. */
  readonly #unrunReports = new Set<Promise<unknown>>();
  /** Ids job-stop named before their job was held, oldest first, at most {@link EARLY_STOPS_KEPT}. */
  readonly #earlyStops = new Set<string>();
  /** Woken when a slot or the job list changes: the take loop and the job-stop poll wait on it. */
  readonly #changes: WaiterSet;
  readonly #closing: AbortSignal;
  #concurrency: number;

  /**
   * @param deps what every job uses (the worker's config, handler, scheduler, outbox settings…).
   * @param closing aborting it ends every {@link waitForChange} at once.
   * @param changes what {@link waitForChange} waits on; the worker shares it with the scheduler,
   *   whose room may grow without a job ending (a batch started). @default a set of its own
   */
  constructor(deps: JobDeps, closing: AbortSignal, changes = new WaiterSet(deps.config.clock)) {
    this.#deps = deps;
    this.#changes = changes;
    this.#closing = closing;
    this.#concurrency = initialConcurrency(deps.definition.concurrency);
    deps.scheduler.setConcurrency(this.#concurrency);
  }

  /** The current concurrency (how many jobs the worker may hold). */
  get concurrency(): number {
    return this.#concurrency;
  }

  /**
   * Consults a concurrency function (the take loop does, between takes), tells the scheduler,
   * and returns how many jobs the worker may hold now: the jobs held plus the scheduler's room
   * (a plain handler's: the concurrency; a batch handler's, whose concurrency counts batches: what
   * the filling batch lacks).
   */
  consultConcurrency(): number {
    const { definition, log, scheduler } = this.#deps;
    this.#concurrency = nextConcurrency(definition.concurrency, this.#concurrency, log);
    scheduler.setConcurrency(this.#concurrency);
    return this.#jobs.size + scheduler.room(this.#jobs.size);
  }

  /** How many jobs the worker holds (running or still being reported): the take's `job_in_progress`. */
  get size(): number {
    return this.#jobs.size;
  }

  /** The ids of the jobs held. */
  ids(): string[] {
    return [...this.#jobs.keys()];
  }

  /** The jobs held right now. */
  jobs(): ActiveJob[] {
    return [...this.#jobs.values()];
  }

  /** The reports of jobs failed unrun that are still being posted. */
  unrunReports(): Promise<unknown>[] {
    return [...this.#unrunReports];
  }

  /**
   * Waits until a slot or the job list changes, `ms` passes, or `signal` aborts (@default the
   * worker's closing signal; the job-stop poll, which outlives it, passes its own).
   */
  async waitForChange(ms: number, signal: AbortSignal = this.#closing): Promise<void> {
    await this.#changes.wait(ms, signal);
  }

  /**
   * Starts the delivered jobs, at most `free` of them (what the take asked for): bad ones are
   * logged and failed, a copy of a job already held is ignored, and jobs beyond `free` are failed
   * unrun. The heartbeat thread's job table lists each job before its handler can run.
   */
  admit(jobs: readonly DeliveredJob[], bad: readonly BadJob[], free: number): void {
    const { log } = this.#deps;
    for (const item of bad) {
      if (item.id !== undefined && this.#jobs.has(item.id)) {
        // A malformed copy of a job already running: the copy is ignored, like a well-formed one;
        // failing it would post a failure for the running job before its real result.
        log.error(
          { code: "RUNLET_PROTOCOL_BAD_JOB", jobId: item.id },
          `the platform delivered a malformed copy of a job this worker is already running; ignoring the copy (${item.reason})`,
        );
        continue;
      }
      log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: item.id }, item.reason);
      if (item.id !== undefined && this.#addressable(item.id)) this.#failUnrun(item.id, item.reason);
    }
    let room = free;
    for (const job of jobs) {
      if (!this.#addressable(job.id)) continue;
      if (this.#jobs.has(job.id)) {
        log.error(
          { code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id },
          "the platform delivered a job this worker is already running; ignoring the copy",
        );
        continue;
      }
      if (this.#earlyStops.delete(job.id)) {
        // Nothing is posted for a stopped job (docs/protocol.md, "Stopping one job"); it takes no slot.
        log.info({ jobId: job.id }, "job-stop named this job before it arrived; not running it");
        continue;
      }
      if (room <= 0) {
        const reason = `the platform delivered more jobs than the ${free} this worker asked for; this job was not run (retry it)`;
        log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id }, reason);
        this.#failUnrun(job.id, reason);
        continue;
      }
      room -= 1;
      this.#start(job);
    }
  }

  /**
   * True when the job's result URLs can name this job. The URL parser takes a path segment `.` or
   * `..` as a step (and `encodeURIComponent` leaves both as they are; every other id it encodes
   * stays one segment): the result of job `..` would go to `/job-done/<pod>/`, not to the job. Such
   * a job is refused, logged with its id, and nothing is posted for it.
   */
  #addressable(jobId: string): boolean {
    if (jobId !== "." && jobId !== "..") return true;
    this.#deps.log.error(
      { code: "RUNLET_PROTOCOL_BAD_JOB", jobId },
      "the platform delivered a job whose id a result URL cannot carry (the URL parser reads it as a path step); refusing it, nothing is posted",
    );
    return false;
  }

  /**
   * job-stop named `jobId`: the job is aborted and posts nothing more; an already stopped id is
   * ignored. An id not held is kept (the last {@link EARLY_STOPS_KEPT}): its take answer may still
   * be on its way, and {@link admit} then does not run it.
   */
  stop(jobId: string): void {
    const job = this.#jobs.get(jobId);
    if (job === undefined) {
      addRecent(this.#earlyStops, jobId, EARLY_STOPS_KEPT);
      return;
    }
    if (job.stopRequested) return;
    job.stop();
    this.#changes.wakeAll();
  }

  #start(job: DeliveredJob): void {
    this.#deps.events?.emit("taken", { jobId: job.id, traceContext: job["traceContext"] });
    // The job mints its heartbeat slot (listed before its handler can run) and releases it when finished.
    const active = new ActiveJob(job, this.#deps);
    this.#jobs.set(job.id, active);
    this.#deps.http.jobsHeld(this.#jobs.size);
    this.#changes.wakeAll();
    const release = (): void => {
      this.#jobs.delete(job.id);
      this.#deps.http.jobsHeld(this.#jobs.size);
      this.#changes.wakeAll();
    };
    // `finished` never rejects (ActiveJob catches into the job's failure); the slot is released either way.
    settle(active.finished.then(release), (err) => {
      this.#deps.log.error({ err, jobId: job.id }, "a job's promise rejected");
      release();
    });
  }

  /**
   * Fails a job the worker will not run with `{error: reason}`, so it is not left IN_PROGRESS,
   * through its own outbox (retried like any result); shutdown waits for the report.
   */
  #failUnrun(jobId: string, reason: string): void {
    const { config, log } = this.#deps;
    const { outbox, reported } = openOutbox(jobId, this.#deps, log.child({ requestId: jobId }));
    outbox.final(config.urls.done(jobId, false), failureBody(reason), false);
    const done = reported
      .catch((err: unknown) => log.error({ err, jobId }, "reporting an unrun job failed"))
      .finally(() => this.#unrunReports.delete(done));
    this.#unrunReports.add(done);
  }
}
