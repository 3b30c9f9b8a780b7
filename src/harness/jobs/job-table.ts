import type { EndpointQueue as Queue } from "./endpoint-queue.js";
import type { Delivery, JobEntry, JobView } from "./job-entry.js";

/** An endpoint's queue, handing out jobs written as JSON. */
type EndpointQueue = Queue<Delivery>;

/** Job counts of one endpoint, as `/health` reports them. */
export interface JobCounts {
  readonly completed: number;
  readonly failed: number;
  readonly inProgress: number;
  readonly inQueue: number;
  readonly retried: number;
}

/**
 * What the rest of the harness may ask the store's table: lookups and counts, no changes. Jobs
 * come out as {@link JobView}s, so a job changes only through the store's methods.
 */
export interface JobLookup extends Pick<JobTable, "hasEndpoint" | "endpointIds" | "counts" | "waitingTakes"> {
  get(id: string): JobView | undefined;
  visible(endpointId: string, id: string): JobView | undefined;
  queued(endpointId: string): JobView[];
  liveJobsOf(endpointId: string): JobView[];
}

/**
 * Every endpoint queue and job of one harness, by id. It answers lookups and counts; the state
 * machine that changes jobs lives in {@link JobStore}, which owns this table.
 */
export class JobTable {
  readonly #endpoints = new Map<string, EndpointQueue>();
  readonly #jobs = new Map<string, JobEntry>();

  /** Registers an endpoint's queue; false (and nothing changed) when the id is taken. */
  addEndpoint(id: string, queue: EndpointQueue): boolean {
    if (this.#endpoints.has(id)) return false;
    this.#endpoints.set(id, queue);
    return true;
  }

  hasEndpoint(id: string): boolean {
    return this.#endpoints.has(id);
  }

  endpointIds(): string[] {
    return [...this.#endpoints.keys()];
  }

  /** The endpoint's queue; throws for an unknown id (callers check ids at the HTTP edge). */
  endpoint(id: string): EndpointQueue {
    const ep = this.#endpoints.get(id);
    if (ep === undefined) throw new Error(`unknown endpoint "${id}"`);
    return ep;
  }

  /** Forgets an endpoint's queue and returns it (undefined when unknown). Its jobs stay in the table. */
  removeEndpoint(id: string): EndpointQueue | undefined {
    const ep = this.#endpoints.get(id);
    this.#endpoints.delete(id);
    return ep;
  }

  /** Every endpoint's queue. */
  queues(): IterableIterator<EndpointQueue> {
    return this.#endpoints.values();
  }

  /** Any job still remembered, deleted ones included. */
  get(id: string): JobEntry | undefined {
    return this.#jobs.get(id);
  }

  /** A job clients may still see: not deleted, and on this endpoint. */
  visible(endpointId: string, id: string): JobEntry | undefined {
    const job = this.#jobs.get(id);
    return job !== undefined && !job.deleted && job.endpointId === endpointId ? job : undefined;
  }

  /** True when a job with this id is remembered. */
  has(id: string): boolean {
    return this.#jobs.has(id);
  }

  /** Adds a new job; its id must be free. */
  add(job: JobEntry): void {
    if (this.#jobs.has(job.id)) throw new Error(`a job with id "${job.id}" already exists`);
    this.#jobs.set(job.id, job);
  }

  /** Drops a job for good (after its tombstone period). */
  forget(id: string): void {
    this.#jobs.delete(id);
  }

  /** The endpoint's jobs that are not deleted, in creation order. */
  liveJobsOf(endpointId: string): JobEntry[] {
    const out: JobEntry[] = [];
    for (const job of this.#jobs.values()) {
      if (job.endpointId === endpointId && !job.deleted) out.push(job);
    }
    return out;
  }

  /** Waiting jobs of an endpoint, oldest first. */
  queued(endpointId: string): JobEntry[] {
    return this.endpoint(endpointId).ids.map((id) => this.#jobs.get(id)!);
  }

  /** Held job-take polls of an endpoint. */
  waitingTakes(endpointId: string): number {
    return this.endpoint(endpointId).waitingTakes;
  }

  /** `/health` job counts of an endpoint. */
  counts(endpointId: string): JobCounts {
    const ep = this.endpoint(endpointId);
    let inProgress = 0;
    for (const job of this.#jobs.values()) {
      if (job.endpointId === endpointId && !job.deleted && job.status === "IN_PROGRESS") inProgress++;
    }
    return {
      completed: ep.completed,
      failed: ep.failed,
      inProgress,
      inQueue: ep.ids.length,
      retried: ep.retried,
    };
  }
}
