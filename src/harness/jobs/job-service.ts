import type { JobRecord, StreamResponse } from "../../protocol/api.js";
import type { ResolvedOptions } from "../options.js";
import type { JobEntry, JobKind, JobView } from "./job-entry.js";
import { recordOf } from "./job-entry.js";
import type { JobStore } from "./job-store.js";
import { parseRunBody } from "./run-body.js";
import { readStream } from "./stream-reader.js";

/** What the job service refused, in the job API's error body's terms (docs/harness.md, "The error body"). */
export interface Refusal {
  readonly ok: false;
  readonly status: number;
  readonly message: string;
  readonly issues?: readonly string[];
}

/** A job service answer: the value, or why not. */
export type Outcome<T> = { readonly ok: true; readonly value: T } | Refusal;

/** A request body as a route read it, for {@link JobService.submit}. */
export interface SubmittedBody {
  /** The parsed JSON (undefined: no body). */
  readonly value: unknown;
  /** Its size in bytes. */
  readonly bytes: number;
  /** The raw text, when the route has it (the number check then names the field as sent). */
  readonly text?: string;
}

/** What the job service needs from the harness. */
export interface JobServiceDeps {
  readonly store: JobStore;
  readonly options: Pick<ResolvedOptions, "limits" | "streamHoldMs" | "streamGatherMs">;
}

const ok = <T>(value: T): Outcome<T> => ({ ok: true, value });
const refuse = (status: number, message: string, issues?: readonly string[]): Refusal => ({
  ok: false,
  status,
  message,
  ...(issues === undefined ? {} : { issues }),
});
const notFound = (jobId: string): Refusal => refuse(404, `job "${jobId}" not found (unknown, or expired)`);

/**
 * The job API's operations, once, for every door into them: the client routes (docs/protocol.md,
 * "Job API") and the dashboard's data routes call the same submit, status, wait, stream, cancel,
 * retry and purge, so a job made from the page is made as `/run` or `/runsync` makes it, and "can
 * this be retried?" is the job's own answer ({@link JobEntry.canRetry}). HTTP stays with the
 * routes: they parse query parameters, check keys and limits, and write the answers.
 */
export class JobService {
  readonly #store: JobStore;
  readonly #options: JobServiceDeps["options"];

  constructor(deps: JobServiceDeps) {
    this.#store = deps.store;
    this.#options = deps.options;
  }

  /**
   * How long a job's result is kept after it ends (docs/protocol.md, "Limits"): 30 min for `/run`,
   * 1 min for `/runsync`, which an explicit `wait` extends to `max(1 min, wait)`, at most 5 min.
   */
  retentionMs(kind: JobKind, waitMs?: number): number {
    const limits = this.#options.limits;
    if (kind === "run") return limits.runRetentionMs;
    return waitMs === undefined
      ? limits.runsyncRetentionMs
      : Math.min(Math.max(waitMs, limits.runsyncRetentionMs), limits.runsyncMaxRetentionMs);
  }

  /**
   * Creates a job as `/run` or `/runsync` does (`waitMs`: a `/runsync`'s explicit `wait`, which sets
   * its retention): the body checked against the route's byte limit and the `/run` body schema.
   */
  submit(endpointId: string, kind: JobKind, body: SubmittedBody, waitMs?: number): Outcome<JobView> {
    if (!this.#store.table.hasEndpoint(endpointId)) return refuse(404, `endpoint "${endpointId}" not found`);
    const limits = this.#options.limits;
    const limit = kind === "run" ? limits.runBytes : limits.runsyncBytes;
    if (body.bytes > limit) return refuse(413, `request body is over the /${kind} limit of ${limit} bytes`);
    const parsed = parseRunBody(body.value, body.bytes, body.text);
    if (!parsed.ok) return refuse(400, parsed.message, parsed.issues);
    return ok(this.#store.create(endpointId, kind, parsed.job, this.retentionMs(kind, waitMs)));
  }

  /**
   * A job clients may see: not deleted, and on `endpointId` when one is named (the dashboard sees
   * every endpoint's jobs).
   */
  find(jobId: string, endpointId?: string): JobView | undefined {
    return this.#entry(jobId, endpointId);
  }

  /** {@link find} as an answer: the job, or 404. */
  lookup(jobId: string, endpointId?: string): Outcome<JobView> {
    const job = this.find(jobId, endpointId);
    return job === undefined ? notFound(jobId) : ok(job);
  }

  /** `/status`: the job's record; `ttlMs` (`?ttl=`) makes it, or its kept result, expire that long from now. */
  status(endpointId: string, jobId: string, ttlMs?: number): Outcome<JobRecord> {
    const job = this.#entry(jobId, endpointId);
    if (job === undefined) return notFound(jobId);
    if (ttlMs !== undefined) this.#store.setTtl(job, ttlMs);
    return ok(recordOf(job));
  }

  /**
   * `/runsync` and `/status-sync`: the job's record once it ends, or as it is when `waitMs` (real
   * time) runs out or `signal` aborts (the client hung up); 404 when it is, or becomes, deleted.
   */
  async awaitRecord(
    endpointId: string,
    jobId: string,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<Outcome<JobRecord>> {
    const job = this.#entry(jobId, endpointId);
    if (job === undefined) return notFound(jobId);
    await this.#store.waits.untilEnded(job.id, waitMs, signal);
    // Deleted while waiting (its ttl, a purge, its endpoint removed): gone, as /status would say.
    return job.deleted ? notFound(jobId) : ok(recordOf(job));
  }

  /** `/stream`: the chunks `reader` has not read yet (stream-reader.ts); 404 when the job is, or becomes, deleted. */
  async stream(
    endpointId: string,
    jobId: string,
    reader: string,
    signal: AbortSignal,
  ): Promise<Outcome<StreamResponse>> {
    const job = this.#entry(jobId, endpointId);
    if (job === undefined) return notFound(jobId);
    const { streamHoldMs, streamGatherMs } = this.#options;
    const answer = await readStream(this.#store, job, reader, streamHoldMs, signal, streamGatherMs);
    return answer === undefined ? notFound(jobId) : ok(answer);
  }

  /** Cancels a queued or running job (a running one's worker gets a job-stop); an ended job keeps its status. */
  cancel(jobId: string, endpointId?: string): Outcome<JobView> {
    const job = this.#entry(jobId, endpointId);
    if (job === undefined) return notFound(jobId);
    this.#store.cancel(job);
    return ok(job);
  }

  /** Puts a FAILED or TIMED_OUT job back in the queue; 400 for any other. */
  retry(jobId: string, endpointId?: string): Outcome<JobView> {
    const job = this.#entry(jobId, endpointId);
    if (job === undefined) return notFound(jobId);
    if (!job.canRetry()) return refuse(400, job.whyNoRetry());
    this.#store.retry(job);
    return ok(job);
  }

  /** `/purge-queue`: removes the endpoint's waiting jobs; running ones go on. */
  purge(endpointId: string): { removed: number; status: "completed" } {
    return { removed: this.#store.purge(endpointId), status: "completed" };
  }

  #entry(jobId: string, endpointId: string | undefined): JobView | undefined {
    const job =
      endpointId === undefined ? this.#store.table.get(jobId) : this.#store.table.visible(endpointId, jobId);
    return job === undefined || job.deleted ? undefined : job;
  }
}
