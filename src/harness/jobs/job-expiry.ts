import { TTL_MS } from "../../protocol/limits.js";
import type { ClockTimer, TimerSet } from "../clock.js";
import type { WorkerRegistry } from "../fleet/worker-registry.js";
import type { JobEntry } from "./job-entry.js";
import type { JobTable } from "./job-table.js";
import type { JobWaits } from "./job-waits.js";

/** How long a deleted job is remembered (for `Harness.job` and counting late results), ms. */
const TOMBSTONE_MS = 60 * 60_000; // 1 h
/** Most deleted jobs remembered at once (about 0.5 KB each); past it the oldest are forgotten. */
export const MAX_TOMBSTONES = 100_000;

/** The clock timers that end or delete one job. */
interface JobTimers {
  ttl: ClockTimer | undefined;
  execution: ClockTimer | undefined;
  retention: ClockTimer | undefined;
}

/** What {@link JobExpiry} works on: the store's table, timers, workers and waits. */
export interface JobExpiryDeps {
  readonly table: JobTable;
  readonly timers: TimerSet;
  readonly workers: WorkerRegistry;
  readonly waits: JobWaits;
  /** An endpoint's queue changed (scaling). */
  readonly onQueueChange: (endpointId: string) => void;
  /** Now on the harness clock, ms. */
  readonly now: () => number;
  /** A job was deleted (the dashboard drops it from its list). */
  readonly onDeleted?: (job: JobEntry) => void;
}

/**
 * When a job's time runs out (docs/protocol.md, "Job states" and "Limits"): the execution timeout of a running job, the
 * ttl from submission, result retention after the end, `/status?ttl=`, and the deletion itself — gone for clients (404), remembered for an hour so
 * late results are still recognised and counted, then forgotten.
 */
export class JobExpiry {
  readonly #deps: JobExpiryDeps;
  /** Deleted jobs still remembered, oldest deletion first, with when they were deleted. */
  readonly #tombstones = new Map<string, number>();
  /** The timers of each job not yet deleted: the job's lifetime is this module's, not the job's. */
  readonly #timers = new Map<string, JobTimers>();
  #sweepTimer: ClockTimer | undefined;

  constructor(deps: JobExpiryDeps) {
    this.#deps = deps;
  }

  /** How many deleted jobs are remembered. */
  get tombstones(): number {
    return this.#tombstones.size;
  }

  /** Arms a new job's ttl (`policy.ttl`, else the platform's default), covering queue and run time. */
  armTtl(job: JobEntry): void {
    this.#timersOf(job).ttl = this.#deps.timers.set(
      () => this.delete(job),
      job.policy?.ttl ?? TTL_MS.default,
    );
  }

  /** Arms a started job's execution timeout; `onTimeout` ends it. */
  armExecution(job: JobEntry, timeoutMs: number, onTimeout: () => void): void {
    const timers = this.#timersOf(job);
    timers.execution = this.#deps.timers.set(() => {
      timers.execution = undefined;
      onTimeout();
    }, timeoutMs);
  }

  /** Disarms the execution timeout (the job ended, or goes back to the queue). */
  clearExecution(job: JobEntry): void {
    const timers = this.#timers.get(job.id);
    if (timers === undefined) return;
    this.#deps.timers.clear(timers.execution);
    timers.execution = undefined;
  }

  /** Arms the result retention of a job that has just ended. */
  armRetention(job: JobEntry): void {
    const timers = this.#timersOf(job);
    this.#deps.timers.clear(timers.retention);
    timers.retention = this.#deps.timers.set(() => this.delete(job), job.retentionMs);
  }

  /** Disarms result retention (a retried job is running again). */
  clearRetention(job: JobEntry): void {
    const timers = this.#timers.get(job.id);
    if (timers === undefined) return;
    this.#deps.timers.clear(timers.retention);
    timers.retention = undefined;
  }

  /** `/status?ttl=`: the job (or its kept result) now expires `ms` from now. */
  setTtl(job: JobEntry, ms: number): void {
    const { timers } = this.#deps;
    const own = this.#timersOf(job);
    if (job.finishedAt !== undefined) {
      timers.clear(own.retention);
      own.retention = timers.set(() => this.delete(job), ms);
    }
    timers.clear(own.ttl);
    own.ttl = timers.set(() => this.delete(job), ms);
  }

  /** Deletes a job (ttl, retention, purge): gone for clients; a running job's worker is told to stop. */
  delete(job: JobEntry): void {
    if (job.deleted) return;
    const { table, timers, workers, waits } = this.#deps;
    // The endpoint may be gone already (Harness.removeEndpoint deletes its jobs after removing it).
    if (job.status === "IN_QUEUE" && table.hasEndpoint(job.endpointId)) {
      table.endpoint(job.endpointId).remove(job.id);
    }
    if (job.status === "IN_PROGRESS" && job.workerId !== undefined) {
      workers.requestStop(job.endpointId, job.workerId, job.id);
    }
    const own = this.#timers.get(job.id);
    if (own !== undefined) for (const t of [own.ttl, own.execution, own.retention]) timers.clear(t);
    this.#timers.delete(job.id);
    // Only a tombstone stays a while, so late results are still recognised and counted, then goes.
    job.delete();
    this.#tombstones.set(job.id, this.#deps.now());
    this.#sweep();
    waits.notify(job.id);
    this.#deps.onDeleted?.(job);
    this.#deps.onQueueChange(job.endpointId);
  }

  /** The timers of a job not yet deleted (a record made on first use, gone with the deletion). */
  #timersOf(job: JobEntry): JobTimers {
    let timers = this.#timers.get(job.id);
    if (timers === undefined) {
      timers = { ttl: undefined, execution: undefined, retention: undefined };
      this.#timers.set(job.id, timers);
    }
    return timers;
  }

  /** Forgets tombstones past their hour, or past the count bound; one timer waits for the oldest. */
  #sweep(): void {
    const { table, timers } = this.#deps;
    const now = this.#deps.now();
    for (const [id, deletedAt] of this.#tombstones) {
      if (this.#tombstones.size <= MAX_TOMBSTONES && now - deletedAt < TOMBSTONE_MS) break;
      this.#tombstones.delete(id);
      table.forget(id);
    }
    const oldest = this.#tombstones.values().next();
    if (oldest.done === true || this.#sweepTimer !== undefined) return;
    this.#sweepTimer = timers.set(
      () => {
        this.#sweepTimer = undefined;
        this.#sweep();
      },
      oldest.value + TOMBSTONE_MS - now,
    );
  }
}
