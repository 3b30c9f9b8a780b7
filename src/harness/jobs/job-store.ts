import { randomUUID } from "node:crypto";
import { RunletError } from "../../errors.js";
import type { BatchQuery } from "../../protocol/batch-query.js";
import type { StreamChunk } from "../../protocol/worker-bodies.js";
import { type Clock, realClock, type TimerSet } from "../clock.js";
import {
  WorkerRegistry as Registry,
  type UnlistedJob,
  type WorkerChange,
  type WorkerRegistry,
  type WorkerState,
} from "../fleet/worker-registry.js";
import { EndpointQueue, type StoreEndpoint } from "./endpoint-queue.js";
import {
  type Delivery,
  deliveredOf,
  type JobEnd,
  JobEntry,
  type JobKind,
  type JobView,
  type NewJob,
} from "./job-entry.js";
import { JobExpiry } from "./job-expiry.js";
import { type JobLookup, JobTable } from "./job-table.js";
import { JobWaits } from "./job-waits.js";

/** What the store tells its owner about. */
export interface StoreEvents {
  /** A job reached a terminal state (webhooks, job events). */
  onTerminal(job: JobEntry): void;
  /** A worker's progress update was applied. */
  onProgress(job: JobEntry, output: unknown): void;
  /** A worker's stream chunk was applied; `index` counts from 1. */
  /** `bytes`: the size of the post that carried it. */
  onChunk(job: JobEntry, chunk: StreamChunk, index: number, bytes: number): void;
  /** An endpoint's queue changed (scaling). */
  onQueueChange(endpointId: string): void;
  /** A job was created, started, put back in the queue or deleted (its end is `onTerminal`). */
  onJobChange?(job: JobEntry): void;
  /** A worker appeared, pinged or lapsed. */
  onWorkerChange?(worker: WorkerState, change: WorkerChange): void;
}

/**
 * The job state machine (docs/protocol.md, "Job states"), for every endpoint of one harness: queue, hand-out to
 * workers, results, cancel, retry, purge, ttl, execution timeout, result retention and heartbeat
 * lapses, and jobs a worker's pings stopped listing. Timers run on the harness clock.
 */
export class JobStore {
  readonly #clock: Clock;
  readonly #holdClock: Clock;
  readonly #events: StoreEvents;
  readonly #table = new JobTable();
  /** Lookups and counts (changes go through the store's methods). */
  readonly table: JobLookup = this.#table;
  readonly #expiry: JobExpiry;
  readonly waits: JobWaits;
  readonly workers: WorkerRegistry;
  /** Ended jobs still kept, oldest end first, with the bytes each holds. */
  readonly #finished = new Map<string, number>();
  readonly #maxFinishedBytes: number;
  readonly #requestsKeepAlive: boolean;
  #finishedBytes = 0;

  constructor(options: {
    clock: Clock;
    timers: TimerSet;
    heartbeatTimeoutMs: number;
    /** A worker that has never pinged is kept alive by any request of its own (a harness in memory). @default false */
    requestsKeepAlive?: boolean;
    /** Most bytes the ended jobs still kept may hold; past it the oldest are deleted. */
    maxFinishedBytes: number;
    /**
     * Times held requests (job-take and job-stop polls, waits on a job): real time, whatever the
     * job clock, since a client holds a connection. @default the real clock
     */
    holdClock?: Clock;
    events: StoreEvents;
  }) {
    this.#clock = options.clock;
    this.#events = options.events;
    this.#maxFinishedBytes = options.maxFinishedBytes;
    this.#requestsKeepAlive = options.requestsKeepAlive ?? false;
    this.#holdClock = options.holdClock ?? realClock();
    this.waits = new JobWaits((id) => this.#table.get(id), this.#holdClock);
    this.workers = new Registry({
      timers: options.timers,
      holdClock: this.#holdClock,
      now: () => this.#clock.now(),
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      requestsKeepAlive: options.requestsKeepAlive ?? false,
      onLapse: (w) => this.#lapsed(w, options.heartbeatTimeoutMs),
      onJobsLost: (w, jobs) => this.#unlisted(w, jobs),
      onChange: (w, change) => this.#events.onWorkerChange?.(w, change),
    });
    this.#expiry = new JobExpiry({
      now: () => this.#clock.now(),
      table: this.#table,
      timers: options.timers,
      workers: this.workers,
      waits: this.waits,
      onQueueChange: (endpointId) => this.#events.onQueueChange(endpointId),
      onDeleted: (job) => {
        this.#unfinish(job);
        this.#events.onJobChange?.(job);
      },
    });
  }

  /** The bounded structures' sizes: ended jobs kept (their bytes) and deleted jobs remembered. */
  memory(): { finishedJobs: number; finishedBytes: number; tombstones: number } {
    return {
      finishedJobs: this.#finished.size,
      finishedBytes: this.#finishedBytes,
      tombstones: this.#expiry.tombstones,
    };
  }

  addEndpoint(id: string, settings: StoreEndpoint): void {
    if (this.#table.hasEndpoint(id)) return;
    this.#table.addEndpoint(
      id,
      new EndpointQueue(settings, (ids, workerId) => this.#start(ids, workerId), this.#holdClock),
    );
  }

  /**
   * Sets the execution timeout of the endpoint's jobs made from now on (ms); jobs already made keep
   * the one they were made with. False when there is no such endpoint.
   */
  updateExecutionTimeout(id: string, executionTimeoutMs: number): boolean {
    if (!this.#table.hasEndpoint(id)) return false;
    const ep = this.#endpoint(id);
    ep.settings = { ...ep.settings, executionTimeoutMs };
    return true;
  }

  /**
   * Removes an endpoint: held job-takes get nothing, every job of it is deleted (a running one's
   * worker is told to stop), its workers are forgotten. False when it was not there.
   */
  removeEndpoint(id: string): boolean {
    const ep = this.#table.removeEndpoint(id);
    if (ep === undefined) return false;
    ep.releaseTakers();
    for (const job of this.#table.liveJobsOf(id)) this.#expiry.delete(job);
    this.workers.removeEndpoint(id);
    return true;
  }

  /** Creates a job IN_QUEUE and offers it to waiting workers. */
  create(endpointId: string, kind: JobKind, spec: NewJob, retentionMs: number): JobEntry {
    const ep = this.#endpoint(endpointId);
    const id = spec.id ?? `${kind === "runsync" ? "sync-" : ""}${randomUUID()}-e1`;
    // The endpoint's execution timeout is fixed now: a later change (updateExecutionTimeout) is for later jobs.
    const job = new JobEntry(
      id,
      endpointId,
      kind,
      spec,
      this.#clock.now(),
      retentionMs,
      ep.settings.executionTimeoutMs,
    );
    this.#table.add(job);
    this.#expiry.armTtl(job);
    ep.push(id);
    this.#events.onJobChange?.(job);
    this.#events.onQueueChange(endpointId);
    return job;
  }

  /**
   * A worker's job-take on an endpoint (see EndpointQueue.take): the jobs handed out, each with its
   * answer already written, and started.
   */
  async take(
    endpointId: string,
    workerId: string,
    max: number,
    holdMs: number,
    signal: AbortSignal,
  ): Promise<Array<{ readonly job: JobView; readonly json: string }>> {
    const ep = this.#endpoint(endpointId);
    const taking = ep.take(workerId, max, holdMs, signal);
    // A held poll is a free worker: the scaler counts it.
    this.#events.onQueueChange(endpointId);
    return await taking;
  }

  /**
   * Hands no more jobs of the endpoint to a worker that is being stopped (see
   * EndpointQueue.retire): its held job-takes get nothing now, its later ones at once. Its running
   * jobs stay its own. A no-op for an endpoint that is gone.
   */
  retire(endpointId: string, workerId: string): void {
    if (!this.#table.hasEndpoint(endpointId)) return;
    this.#endpoint(endpointId).retire(workerId);
    // A held poll was a free worker: the scaler counts again.
    this.#events.onQueueChange(endpointId);
  }

  /**
   * Jobs handed to a worker whose connection failed before the answer went out go back to the
   * front of the queue, rather than waiting for a heartbeat lapse or their timeout.
   */
  undeliver(endpointId: string, workerId: string, jobs: readonly JobView[]): void {
    const back = jobs.map((j) => this.#own(j)).filter((j) => j.isRunningOn(workerId));
    for (const job of back) {
      this.workers.drop(this.workers.get(endpointId, workerId), job.id);
      this.#resetForQueue(job);
      this.waits.notify(job.id);
    }
    if (back.length > 0) this.#endpoint(endpointId).unshift(back.map((j) => j.id));
  }

  /** An IN_PROGRESS update from the worker (`bytes` its body's size). Returns false when the job had already ended. */
  addProgress(view: JobView, output: unknown, bytes = 0): boolean {
    const job = this.#own(view);
    if (!job.addProgress(output, bytes)) return false;
    this.waits.notify(job.id);
    this.#events.onProgress(job, output);
    return true;
  }

  /** A stream chunk from the worker (`bytes` its body's size). Returns false when the job had already ended. */
  addChunk(view: JobView, chunk: StreamChunk, bytes = 0): boolean {
    const job = this.#own(view);
    if (!job.addChunk(chunk, bytes)) return false;
    this.waits.notify(job.id);
    this.#events.onChunk(job, chunk, job.stream.length, bytes);
    return true;
  }

  /** The worker's final result. A result for a job that has already ended is counted and ignored. */
  complete(
    view: JobView,
    result: {
      output?: unknown;
      error?: string;
      stopPod: boolean;
      isStream: boolean | undefined;
      batch?: BatchQuery | undefined;
      /** The result body's size. @default 0 */
      bytes?: number;
    },
  ): boolean {
    const job = this.#own(view);
    if (job.isEnded()) {
      job.countDuplicate();
      return false;
    }
    job.noteResult(result);
    if (result.error !== undefined) {
      this.#finish(job, { status: "FAILED", error: result.error });
    } else {
      this.#finish(job, { status: "COMPLETED", output: result.output, hasOutput: "output" in result });
    }
    return true;
  }

  /** Cancels a queued or running job (a running one gets a job-stop). Ended jobs are left as they are. */
  cancel(view: JobView): void {
    const job = this.#own(view);
    if (job.isEnded()) return;
    this.#finish(job, { status: "CANCELLED" });
  }

  /**
   * Puts a FAILED or TIMED_OUT job back in the queue: same id and input, old results gone. Throws
   * `RUNLET_HARNESS_JOB_STATE` for any other job (ask {@link JobEntry.canRetry} first).
   */
  retry(view: JobView): void {
    const job = this.#own(view);
    job.retry();
    this.#expiry.clearRetention(job);
    this.#expiry.clearExecution(job);
    this.#unfinish(job);
    this.#events.onJobChange?.(job);
    this.#endpoint(job.endpointId).retried++;
    this.#enqueueAgain(job);
  }

  /** Removes every waiting job of an endpoint; returns how many. Running jobs go on. */
  purge(endpointId: string): number {
    const ids = this.#endpoint(endpointId).drain();
    for (const id of ids) this.#expiry.delete(this.#table.get(id)!);
    this.#events.onQueueChange(endpointId);
    return ids.length;
  }

  /** `/status?ttl=`: the job (or its kept result) now expires `ms` from now. */
  setTtl(view: JobView, ms: number): void {
    this.#expiry.setTtl(this.#own(view), ms);
  }

  /** `reader` has read the job's stream up to chunk `position` (`/stream`, stream-reader.ts). */
  markRead(view: JobView, reader: string, position: number): void {
    this.#own(view).markRead(reader, position);
  }

  /** A post from a worker that does not hold the job (a stray): counted on the job, ignored. */
  countStray(view: JobView): void {
    this.#own(view).countStray();
  }

  /**
   * The entry behind a view the table handed out: every change of a job goes through the store's
   * methods, which take views (what the rest of the harness holds) and change their entry here.
   */
  #own(view: JobView): JobEntry {
    const job = this.#table.get(view.id);
    if (job !== view) {
      throw new RunletError(
        "RUNLET_HARNESS_JOB_STATE",
        `job "${view.id}" is not this store's (a harness bug)`,
        {
          details: { jobId: view.id },
        },
      );
    }
    return job;
  }

  /** Ends every held poll and wait; timers are the owner's (TimerSet.clearAll). */
  close(): void {
    for (const ep of this.#table.queues()) ep.releaseTakers();
    this.workers.clear();
    this.waits.closeAll();
  }

  #endpoint(id: string): EndpointQueue<Delivery> {
    return this.#table.endpoint(id);
  }

  /**
   * Jobs just taken from the queue for a worker: each is written as JSON first, and only a job whose
   * answer exists starts running (IN_PROGRESS, its execution timeout armed). One that cannot be
   * written (an input JSON cannot hold, put in through `Harness.enqueue`) fails with that reason
   * rather than being marked as running on a worker that never got it.
   */
  #start(ids: readonly string[], workerId: string): Delivery[] {
    const handed: Delivery[] = [];
    for (const id of ids) {
      const job = this.#table.get(id)!;
      const ep = this.#endpoint(job.endpointId);
      let json: string;
      try {
        json = JSON.stringify(deliveredOf(job));
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        this.#finish(job, {
          status: "FAILED",
          error: `the job could not be handed out: its JSON cannot be written (${why})`,
        });
        continue;
      }
      handed.push({ job, json });
      job.start(workerId, this.#clock.now());
      this.workers.handOut(job.endpointId, workerId, job.id);
      const timeoutMs =
        job.policy?.executionTimeout ?? job.executionTimeoutMs ?? ep.settings.executionTimeoutMs;
      this.#expiry.armExecution(job, timeoutMs, () =>
        this.#finish(job, {
          status: "TIMED_OUT",
          error: `job timed out after ${timeoutMs} ms (executionTimeout)`,
        }),
      );
      this.waits.notify(job.id);
      this.#events.onJobChange?.(job);
      this.#events.onQueueChange(job.endpointId);
    }
    return handed;
  }

  /** Keeps an ended job in the bounded store of ended jobs; past the bound, the oldest are deleted. */
  #keepFinished(job: JobEntry): void {
    this.#unfinish(job);
    this.#finished.set(job.id, job.bytes);
    this.#finishedBytes += job.bytes;
    // The newest stays even alone over the bound: a client is usually about to read it.
    while (this.#finishedBytes > this.#maxFinishedBytes && this.#finished.size > 1) {
      const oldest = this.#finished.keys().next().value!;
      this.#expiry.delete(this.#table.get(oldest)!);
    }
  }

  /** Takes a job out of the store of ended jobs (deleted, or retried). */
  #unfinish(job: JobEntry): void {
    const bytes = this.#finished.get(job.id);
    if (bytes === undefined) return;
    this.#finished.delete(job.id);
    this.#finishedBytes -= bytes;
  }

  #finish(job: JobEntry, end: JobEnd): void {
    const { status } = end;
    const ep = this.#endpoint(job.endpointId);
    const wasRunning = job.status === "IN_PROGRESS";
    if (job.status === "IN_QUEUE") ep.remove(job.id);
    if (wasRunning && job.workerId !== undefined && status !== "COMPLETED" && status !== "FAILED") {
      // Cancel and timeout reach the worker as a job-stop (docs/protocol.md, "Stopping one job").
      this.workers.requestStop(job.endpointId, job.workerId, job.id);
    } else if (job.workerId !== undefined) {
      this.workers.drop(this.workers.get(job.endpointId, job.workerId), job.id);
    }
    this.#expiry.clearExecution(job);
    job.finish(end, this.#clock.now());
    if (status === "COMPLETED") ep.completed++;
    if (status === "FAILED" || status === "TIMED_OUT") ep.failed++;
    this.#expiry.armRetention(job);
    this.waits.notify(job.id);
    this.#events.onTerminal(job);
    this.#keepFinished(job);
    this.#events.onQueueChange(job.endpointId);
  }

  #resetForQueue(job: JobEntry): void {
    this.#expiry.clearExecution(job);
    job.requeue();
    this.#events.onJobChange?.(job);
  }

  #enqueueAgain(job: JobEntry): void {
    this.waits.notify(job.id);
    this.#endpoint(job.endpointId).push(job.id);
    this.#events.onQueueChange(job.endpointId);
  }

  /**
   * A worker stopped pinging: its held job-takes get nothing, its running jobs are requeued once,
   * and fail on a second loss.
   */
  #lapsed(worker: WorkerState, heartbeatTimeoutMs: number): void {
    if (this.#table.hasEndpoint(worker.endpointId))
      this.#endpoint(worker.endpointId).releaseTakersOf(worker.id);
    // A worker kept alive by its requests (in memory, never pinged) went silent altogether.
    const silence =
      worker.lastPingAt === undefined && this.#requestsKeepAlive
        ? `stopped sending requests (none for ${heartbeatTimeoutMs} ms)`
        : `stopped sending heartbeats (no ping for ${heartbeatTimeoutMs} ms)`;
    for (const id of worker.jobs) {
      this.#lost(id, worker.id, `worker ${worker.id} ${silence} while running this job, for the second time`);
    }
    worker.jobs.clear();
    worker.unlistedSince.clear();
    this.#events.onQueueChange(worker.endpointId);
  }

  /**
   * A worker pings but has left these jobs out of its pings for `heartbeatTimeoutMs` (a restarted
   * process under the same id, say): it is not running them, so they are lost like a lapsed
   * worker's, while the worker itself stays connected.
   */
  #unlisted(worker: WorkerState, jobs: readonly UnlistedJob[]): void {
    for (const { jobId, unlistedMs } of jobs) {
      this.workers.drop(worker, jobId);
      worker.unlistedSince.delete(jobId);
      this.#lost(
        jobId,
        worker.id,
        `worker ${worker.id} stopped listing this job in its pings for ${unlistedMs} ms, for the second time`,
      );
    }
    this.#events.onQueueChange(worker.endpointId);
  }

  /**
   * A running job whose worker lost it (lapsed, or stopped listing it): back to the queue the first
   * time (counted in `retried`), FAILED with `secondLossError` the second. Jobs that ended, were
   * stopped or belong to another worker by now are left alone.
   */
  #lost(jobId: string, workerId: string, secondLossError: string): void {
    const job = this.#table.get(jobId);
    if (job === undefined || !job.isRunningOn(workerId)) return;
    if (job.countLoss() >= 2) {
      this.#finish(job, { status: "FAILED", error: secondLossError });
    } else {
      this.#resetForQueue(job);
      this.#endpoint(job.endpointId).retried++;
      this.#enqueueAgain(job);
    }
  }
}
