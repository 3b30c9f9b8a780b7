import { randomUUID } from "node:crypto";
import { type JobStatus, TERMINAL_STATUSES } from "../protocol/api.js";
import { TTL_MS } from "../protocol/limits.js";
import type { StreamChunk } from "../protocol/worker-bodies.js";
import type { Clock, TimerSet } from "./clock.js";
import type { JobEntry, JobKind, NewJob } from "./job-entry.js";
import { JobWaits } from "./job-waits.js";
import { WorkerRegistry as Registry, type WorkerRegistry, type WorkerState } from "./worker-registry.js";

/** How long a deleted job is remembered (for `Harness.job` and counting late results), ms. */
const TOMBSTONE_MS = 60 * 60_000; // 1 h

/** Per-endpoint settings the store needs. */
export interface StoreEndpoint {
  /** Execution timeout when a job carries no `policy.executionTimeout`, ms. */
  readonly executionTimeoutMs: number;
}

interface EndpointState {
  readonly settings: StoreEndpoint;
  /** Waiting job ids, oldest first. */
  queue: string[];
  /** Held job-take polls, oldest first. */
  readonly takers: Array<{
    readonly workerId: string;
    readonly max: number;
    resolve(jobs: JobEntry[]): void;
  }>;
  completed: number;
  failed: number;
  retried: number;
}

/** What the store tells its owner about. */
export interface StoreEvents {
  /** A job reached a terminal state (webhooks). */
  onTerminal(job: JobEntry): void;
  /** An endpoint's queue changed (scaling). */
  onQueueChange(endpointId: string): void;
}

/**
 * The job state machine of platform-api §3, for every endpoint of one harness: queue, hand-out to
 * workers, results, cancel, retry, purge, ttl, execution timeout, result retention and heartbeat
 * lapses. Timers run on the harness clock.
 */
export class JobStore {
  readonly #clock: Clock;
  readonly #timers: TimerSet;
  readonly #events: StoreEvents;
  readonly #endpoints = new Map<string, EndpointState>();
  readonly #jobs = new Map<string, JobEntry>();
  readonly waits = new JobWaits();
  readonly workers: WorkerRegistry;

  constructor(options: { clock: Clock; timers: TimerSet; heartbeatTimeoutMs: number; events: StoreEvents }) {
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#events = options.events;
    this.workers = new Registry({
      timers: options.timers,
      now: () => this.#clock.now(),
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      onLapse: (w) => this.#lapsed(w, options.heartbeatTimeoutMs),
    });
  }

  addEndpoint(id: string, settings: StoreEndpoint): void {
    if (this.#endpoints.has(id)) return;
    this.#endpoints.set(id, { settings, queue: [], takers: [], completed: 0, failed: 0, retried: 0 });
  }

  hasEndpoint(id: string): boolean {
    return this.#endpoints.has(id);
  }

  endpointIds(): string[] {
    return [...this.#endpoints.keys()];
  }

  /** Any job ever created here, deleted ones included. */
  get(id: string): JobEntry | undefined {
    return this.#jobs.get(id);
  }

  /** A job clients may still see: not deleted, and on this endpoint. */
  visible(endpointId: string, id: string): JobEntry | undefined {
    const job = this.#jobs.get(id);
    return job !== undefined && !job.deleted && job.endpointId === endpointId ? job : undefined;
  }

  /** Creates a job IN_QUEUE and offers it to waiting workers. */
  create(endpointId: string, kind: JobKind, spec: NewJob, retentionMs: number): JobEntry {
    const ep = this.#endpoint(endpointId);
    const id = spec.id ?? `${kind === "runsync" ? "sync-" : ""}${randomUUID()}-e1`;
    if (this.#jobs.has(id)) throw new Error(`a job with id "${id}" already exists`);
    const job: JobEntry = {
      id,
      endpointId,
      kind,
      input: spec.input,
      policy: spec.policy,
      s3Config: spec.s3Config,
      webhook: spec.webhook,
      status: "IN_QUEUE",
      createdAt: this.#clock.now(),
      startedAt: undefined,
      finishedAt: undefined,
      output: undefined,
      hasOutput: false,
      error: undefined,
      stopPod: false,
      workerId: undefined,
      progress: [],
      stream: [],
      isStream: undefined,
      duplicateResults: 0,
      latePosts: 0,
      lapses: 0,
      deleted: false,
      retentionMs,
      readers: new Map(),
      ttlTimer: undefined,
      executionTimer: undefined,
      retentionTimer: undefined,
    };
    this.#jobs.set(id, job);
    job.ttlTimer = this.#timers.set(() => this.#delete(job), spec.policy?.ttl ?? TTL_MS.default);
    ep.queue.push(id);
    this.#dispatch(endpointId);
    this.#events.onQueueChange(endpointId);
    return job;
  }

  /** Waiting jobs of an endpoint, oldest first. */
  queued(endpointId: string): JobEntry[] {
    return this.#endpoint(endpointId).queue.map((id) => this.#jobs.get(id)!);
  }

  /** Held job-take polls of an endpoint. */
  waitingTakes(endpointId: string): number {
    return this.#endpoint(endpointId).takers.length;
  }

  /**
   * A worker's job-take: up to `max` queued jobs at once, else the first that arrives within
   * `holdMs`, else none. Aborting the signal (the worker hung up) withdraws the poll.
   */
  take(
    endpointId: string,
    workerId: string,
    max: number,
    holdMs: number,
    signal: AbortSignal,
  ): Promise<JobEntry[]> {
    const ep = this.#endpoint(endpointId);
    if (ep.queue.length > 0) return Promise.resolve(this.#hand(ep, workerId, max));
    return new Promise((resolve) => {
      const taker = {
        workerId,
        max,
        resolve: (jobs: JobEntry[]) => {
          clearTimeout(timer);
          signal.removeEventListener("abort", withdraw);
          resolve(jobs);
        },
      };
      const withdraw = () => {
        const at = ep.takers.indexOf(taker);
        if (at >= 0) ep.takers.splice(at, 1);
        taker.resolve([]);
      };
      const timer = setTimeout(withdraw, holdMs);
      signal.addEventListener("abort", withdraw, { once: true });
      ep.takers.push(taker);
      this.#events.onQueueChange(endpointId);
    });
  }

  /** A worker's job-stop poll: the ids to stop, at once or within `holdMs`, else none. */
  stopPoll(worker: WorkerState, holdMs: number, signal: AbortSignal): Promise<string[]> {
    const drain = () => worker.pendingStops.splice(0);
    if (worker.pendingStops.length > 0) return Promise.resolve(drain());
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        if (worker.stopWaiter === done) worker.stopWaiter = undefined;
        resolve(signal.aborted ? [] : drain());
      };
      const timer = setTimeout(done, holdMs);
      signal.addEventListener("abort", done, { once: true });
      worker.stopWaiter = done;
    });
  }

  /** An IN_PROGRESS update from the worker. Returns false when the job had already ended. */
  addProgress(job: JobEntry, output: unknown): boolean {
    if (this.#ended(job)) {
      job.latePosts++;
      return false;
    }
    job.progress.push(output);
    this.waits.notify(job.id);
    return true;
  }

  /** A stream chunk from the worker. Returns false when the job had already ended. */
  addChunk(job: JobEntry, chunk: StreamChunk): boolean {
    if (this.#ended(job)) {
      job.latePosts++;
      return false;
    }
    job.stream.push(chunk);
    this.waits.notify(job.id);
    return true;
  }

  /** The worker's final result. A result for a job that has already ended is counted and ignored. */
  complete(
    job: JobEntry,
    result: { output?: unknown; error?: string; stopPod: boolean; isStream: boolean | undefined },
  ): boolean {
    if (this.#ended(job)) {
      job.duplicateResults++;
      return false;
    }
    job.stopPod = result.stopPod;
    job.isStream = result.isStream;
    if (result.error !== undefined) {
      this.#finish(job, "FAILED", { error: result.error });
    } else {
      this.#finish(job, "COMPLETED", { output: result.output, hasOutput: "output" in result });
    }
    return true;
  }

  /** Cancels a queued or running job (a running one gets a job-stop). Ended jobs are left as they are. */
  cancel(job: JobEntry): void {
    if (this.#ended(job)) return;
    this.#finish(job, "CANCELLED", {});
  }

  /** Puts a FAILED or TIMED_OUT job back in the queue: same id and input, old results gone. */
  retry(job: JobEntry): void {
    if (job.status !== "FAILED" && job.status !== "TIMED_OUT") {
      throw new Error(`only FAILED or TIMED_OUT jobs can be retried; job ${job.id} is ${job.status}`);
    }
    this.#timers.clear(job.retentionTimer);
    job.retentionTimer = undefined;
    this.#resetForQueue(job);
    job.lapses = 0;
    job.stopPod = false;
    job.isStream = undefined;
    job.progress = [];
    job.stream = [];
    job.readers.clear();
    this.#endpoint(job.endpointId).retried++;
    this.#enqueueAgain(job);
  }

  /** Removes every waiting job of an endpoint; returns how many. Running jobs go on. */
  purge(endpointId: string): number {
    const ep = this.#endpoint(endpointId);
    const ids = ep.queue.splice(0);
    for (const id of ids) this.#delete(this.#jobs.get(id)!);
    this.#events.onQueueChange(endpointId);
    return ids.length;
  }

  /** `/status?ttl=`: the job (or its kept result) now expires `ms` from now. */
  setTtl(job: JobEntry, ms: number): void {
    if (job.finishedAt !== undefined) {
      this.#timers.clear(job.retentionTimer);
      job.retentionTimer = this.#timers.set(() => this.#delete(job), ms);
    }
    this.#timers.clear(job.ttlTimer);
    job.ttlTimer = this.#timers.set(() => this.#delete(job), ms);
  }

  /** Job counts for `/health`. */
  jobCounts(endpointId: string): {
    completed: number;
    failed: number;
    inProgress: number;
    inQueue: number;
    retried: number;
  } {
    const ep = this.#endpoint(endpointId);
    let inProgress = 0;
    for (const job of this.#jobs.values()) {
      if (job.endpointId === endpointId && !job.deleted && job.status === "IN_PROGRESS") inProgress++;
    }
    return {
      completed: ep.completed,
      failed: ep.failed,
      inProgress,
      inQueue: ep.queue.length,
      retried: ep.retried,
    };
  }

  /** Ends every held poll and wait; timers are the owner's (TimerSet.clearAll). */
  close(): void {
    for (const ep of this.#endpoints.values()) {
      for (const taker of ep.takers.splice(0)) taker.resolve([]);
    }
    this.workers.clear();
    this.waits.closeAll();
  }

  #endpoint(id: string): EndpointState {
    const ep = this.#endpoints.get(id);
    if (ep === undefined) throw new Error(`unknown endpoint "${id}"`);
    return ep;
  }

  #ended(job: JobEntry): boolean {
    return job.deleted || TERMINAL_STATUSES.has(job.status);
  }

  #dispatch(endpointId: string): void {
    const ep = this.#endpoint(endpointId);
    while (ep.queue.length > 0 && ep.takers.length > 0) {
      const taker = ep.takers.shift()!;
      taker.resolve(this.#hand(ep, taker.workerId, taker.max));
    }
  }

  #hand(ep: EndpointState, workerId: string, max: number): JobEntry[] {
    const jobs = ep.queue.splice(0, Math.max(1, max)).map((id) => this.#jobs.get(id)!);
    const worker = jobs[0] === undefined ? undefined : this.workers.get(jobs[0].endpointId, workerId);
    for (const job of jobs) {
      job.status = "IN_PROGRESS";
      job.startedAt = this.#clock.now();
      job.workerId = workerId;
      worker?.jobs.add(job.id);
      const timeoutMs = job.policy?.executionTimeout ?? ep.settings.executionTimeoutMs;
      job.executionTimer = this.#timers.set(() => {
        job.executionTimer = undefined;
        this.#finish(job, "TIMED_OUT", { error: `job timed out after ${timeoutMs} ms (executionTimeout)` });
      }, timeoutMs);
      this.waits.notify(job.id);
    }
    if (jobs.length > 0) this.#events.onQueueChange(jobs[0]!.endpointId);
    return jobs;
  }

  #finish(
    job: JobEntry,
    status: JobStatus,
    fields: { output?: unknown; hasOutput?: boolean; error?: string },
  ): void {
    const ep = this.#endpoint(job.endpointId);
    const wasRunning = job.status === "IN_PROGRESS";
    if (job.status === "IN_QUEUE") ep.queue = ep.queue.filter((id) => id !== job.id);
    if (wasRunning && job.workerId !== undefined && status !== "COMPLETED" && status !== "FAILED") {
      // Cancel and timeout reach the worker as a job-stop (worker-protocol §6).
      this.workers.requestStop(job.endpointId, job.workerId, job.id);
    } else if (job.workerId !== undefined) {
      this.workers.get(job.endpointId, job.workerId)?.jobs.delete(job.id);
    }
    this.#timers.clear(job.executionTimer);
    job.executionTimer = undefined;
    job.status = status;
    job.finishedAt = this.#clock.now();
    job.startedAt ??= job.finishedAt;
    job.output = fields.output;
    job.hasOutput = fields.hasOutput ?? false;
    job.error = fields.error;
    if (status === "COMPLETED") ep.completed++;
    if (status === "FAILED" || status === "TIMED_OUT") ep.failed++;
    job.retentionTimer = this.#timers.set(() => this.#delete(job), job.retentionMs);
    this.waits.notify(job.id);
    this.#events.onTerminal(job);
    this.#events.onQueueChange(job.endpointId);
  }

  /** ttl or retention elapsed (or a purge): gone for clients; a running job's worker is told to stop. */
  #delete(job: JobEntry): void {
    if (job.deleted) return;
    const ep = this.#endpoint(job.endpointId);
    if (job.status === "IN_QUEUE") ep.queue = ep.queue.filter((id) => id !== job.id);
    if (job.status === "IN_PROGRESS" && job.workerId !== undefined) {
      this.workers.requestStop(job.endpointId, job.workerId, job.id);
    }
    for (const t of [job.ttlTimer, job.executionTimer, job.retentionTimer]) this.#timers.clear(t);
    job.deleted = true;
    // The record stays a while so late results are still recognised and counted, then goes.
    this.#timers.set(() => this.#jobs.delete(job.id), TOMBSTONE_MS);
    this.waits.notify(job.id);
    this.#events.onQueueChange(job.endpointId);
  }

  #resetForQueue(job: JobEntry): void {
    this.#timers.clear(job.executionTimer);
    job.executionTimer = undefined;
    job.status = "IN_QUEUE";
    job.startedAt = undefined;
    job.finishedAt = undefined;
    job.output = undefined;
    job.hasOutput = false;
    job.error = undefined;
    job.workerId = undefined;
  }

  #enqueueAgain(job: JobEntry): void {
    this.#endpoint(job.endpointId).queue.push(job.id);
    this.waits.notify(job.id);
    this.#dispatch(job.endpointId);
    this.#events.onQueueChange(job.endpointId);
  }

  /** A worker went silent: its running jobs are requeued once, and fail on a second lapse. */
  #lapsed(worker: WorkerState, heartbeatTimeoutMs: number): void {
    for (const id of worker.jobs) {
      const job = this.#jobs.get(id);
      if (job === undefined || this.#ended(job) || job.status !== "IN_PROGRESS") continue;
      job.lapses++;
      if (job.lapses >= 2) {
        this.#finish(job, "FAILED", {
          error: `worker ${worker.id} stopped sending heartbeats (no request for ${heartbeatTimeoutMs} ms) while running this job, for the second time`,
        });
      } else {
        this.#resetForQueue(job);
        this.#endpoint(job.endpointId).retried++;
        this.#enqueueAgain(job);
      }
    }
    worker.jobs.clear();
    this.#events.onQueueChange(worker.endpointId);
  }
}
