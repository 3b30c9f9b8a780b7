import { RunletError } from "../../errors.js";
import type { JobRecord, JobStatus, RunRequest } from "../../protocol/api.js";
import type { BatchQuery } from "../../protocol/batch-query.js";
import type { Policy } from "../../protocol/job.js";
import type { StreamChunk } from "../../protocol/worker-bodies.js";

/** How a job was submitted: its id prefix and its result retention depend on it. */
export type JobKind = "run" | "runsync";

/**
 * `s3Config` as a job carries it: whatever object the client sent, unknown keys and missing fields
 * included (docs/protocol.md, "Job bodies": the service only passes it through; the worker's S3 module says what
 * is missing when a handler uses it).
 */
export type JobS3Config = NonNullable<RunRequest["s3Config"]>;

/** Keys of a delivered job the harness sets itself; `extra` cannot override them. */
const OWN_KEYS: ReadonlySet<string> = new Set(["id", "input", "policy", "s3Config", "webhook"]);

/** What a job is created from (a `/run` body, or `Harness.enqueue`). */
export interface NewJob {
  readonly input: unknown;
  /** A job id to use instead of a generated one (in-process enqueue only). */
  readonly id?: string;
  readonly policy?: Policy;
  readonly s3Config?: JobS3Config;
  readonly webhook?: string;
  /** Size of the request body it came from, bytes (counted in the store's memory bound). @default 0 */
  readonly bytes?: number;
  /**
   * Other top-level keys of the request body (e.g. the official JS client's `webhookV2`): the
   * platform passes them to the worker, so the delivered job carries them untouched. Keys the
   * harness sets itself (`id`, `input`, `policy`, `s3Config`, `webhook`) are ignored here.
   */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/**
 * A harness job's life (docs/protocol.md, "Job states"), plus the tombstone:
 * - `IN_QUEUE`: waiting for a worker (new, retried, or put back after a lost attempt).
 * - `IN_PROGRESS`: handed to one worker, whose results alone may change it.
 * - `COMPLETED`, `FAILED`, `CANCELLED`, `TIMED_OUT`: ended; its result is kept for its retention.
 * - `DELETED`: the tombstone (ttl, retention, purge, the memory bound, its endpoint removed): gone
 *   for clients, remembered a while so late results are recognised and counted. Its `status` stays
 *   the one it had when it was deleted.
 */
export type JobState = JobStatus | "DELETED";

/**
 * The states each state may move to: the one table every change of a job's state goes through.
 * IN_QUEUE → FAILED is a job whose JSON cannot be written for a worker; IN_PROGRESS → IN_QUEUE a
 * hand-out that never arrived or an attempt lost with its worker; FAILED/TIMED_OUT → IN_QUEUE a retry.
 */
const NEXT: Readonly<Record<JobState, readonly JobState[]>> = {
  IN_QUEUE: ["IN_PROGRESS", "FAILED", "CANCELLED", "DELETED"],
  IN_PROGRESS: ["IN_QUEUE", "COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT", "DELETED"],
  COMPLETED: ["DELETED"],
  FAILED: ["IN_QUEUE", "DELETED"],
  CANCELLED: ["DELETED"],
  TIMED_OUT: ["IN_QUEUE", "DELETED"],
  DELETED: [],
};

/** Statuses a client may retry (docs/protocol.md, "Job API": `/retry`). */
const RETRYABLE: ReadonlySet<JobState> = new Set(["FAILED", "TIMED_OUT"]);

/** How much of a deleted job's error text its tombstone keeps, in UTF-16 units. */
const TOMBSTONE_ERROR_CHARS = 1_024;

/** What ends a job: its terminal status, its output (when the worker sent one) and error. */
export interface JobEnd {
  readonly status: "COMPLETED" | "FAILED" | "CANCELLED" | "TIMED_OUT";
  readonly output?: unknown;
  readonly hasOutput?: boolean;
  readonly error?: string;
}

/** What a worker's final result says besides its output. */
export interface ResultFacts {
  readonly stopPod: boolean;
  readonly isStream: boolean | undefined;
  readonly batch?: BatchQuery | undefined;
  /** The result body's size. @default 0 */
  readonly bytes?: number;
}

/**
 * One job inside the harness. It owns its state: every field is private, every change is one of
 * its methods, and the lifecycle moves only through {@link NEXT}. The store decides when (a take,
 * a result, a timer); the job decides whether the move is allowed and what it clears. Routes and
 * the dashboard read it through getters and snapshots ({@link snapshotOf}, {@link recordOf}).
 */
export class JobEntry {
  readonly id: string;
  readonly endpointId: string;
  readonly kind: JobKind;
  readonly createdAt: number;
  /** Result retention after the job ends, ms. */
  readonly retentionMs: number;
  /**
   * Its endpoint's execution timeout when it was made, ms (used unless `policy.executionTimeout`
   * sets one): a later change of the endpoint's applies to later jobs only. Undefined: the
   * endpoint's when it starts.
   */
  readonly executionTimeoutMs: number | undefined;
  #state: JobState = "IN_QUEUE";
  /** The status clients see: the state, or for a tombstone the state it had when deleted. */
  #status: JobStatus = "IN_QUEUE";
  /** The request's data; dropped when the job is deleted (see {@link delete}). */
  #input: unknown;
  #policy: Policy | undefined;
  #s3Config: JobS3Config | undefined;
  #webhook: string | undefined;
  #extra: Readonly<Record<string, unknown>>;
  #bytes: number;
  #startedAt: number | undefined;
  #finishedAt: number | undefined;
  #output: unknown;
  #hasOutput = false;
  #error: string | undefined;
  #stopPod = false;
  #workerId: string | undefined;
  #progress: unknown[] = [];
  #stream: StreamChunk[] = [];
  #isStream: boolean | undefined;
  #batch: BatchQuery | undefined;
  #duplicateResults = 0;
  #latePosts = 0;
  #strayPosts = 0;
  #lapses = 0;
  /** Per reader (API key): how many stream chunks it has read. */
  readonly #readers = new Map<string, number>();

  /** A new job, IN_QUEUE, created at `now`. */
  constructor(
    id: string,
    endpointId: string,
    kind: JobKind,
    spec: NewJob,
    now: number,
    retentionMs: number,
    executionTimeoutMs?: number,
  ) {
    this.id = id;
    this.endpointId = endpointId;
    this.kind = kind;
    this.createdAt = now;
    this.retentionMs = retentionMs;
    this.executionTimeoutMs = executionTimeoutMs;
    this.#input = spec.input;
    this.#policy = spec.policy;
    this.#s3Config = spec.s3Config;
    this.#webhook = spec.webhook;
    this.#extra = Object.fromEntries(Object.entries(spec.extra ?? {}).filter(([k]) => !OWN_KEYS.has(k)));
    this.#bytes = spec.bytes ?? 0;
  }

  /** Where the job is in its life; `DELETED` for a tombstone. */
  get state(): JobState {
    return this.#state;
  }
  /** The status clients see (a tombstone keeps the one it had). */
  get status(): JobStatus {
    return this.#status;
  }
  /** True for a tombstone: gone for clients (404), late results still counted. */
  get deleted(): boolean {
    return this.#state === "DELETED";
  }
  get input(): unknown {
    return this.#input;
  }
  get policy(): Policy | undefined {
    return this.#policy;
  }
  get s3Config(): JobS3Config | undefined {
    return this.#s3Config;
  }
  get webhook(): string | undefined {
    return this.#webhook;
  }
  /** Unknown top-level keys of the request body, delivered as they came. */
  get extra(): Readonly<Record<string, unknown>> {
    return this.#extra;
  }
  /** Bytes of the bodies it was made of: its request, progress updates, stream chunks and result. */
  get bytes(): number {
    return this.#bytes;
  }
  get startedAt(): number | undefined {
    return this.#startedAt;
  }
  get finishedAt(): number | undefined {
    return this.#finishedAt;
  }
  get output(): unknown {
    return this.#output;
  }
  get hasOutput(): boolean {
    return this.#hasOutput;
  }
  get error(): string | undefined {
    return this.#error;
  }
  get stopPod(): boolean {
    return this.#stopPod;
  }
  get workerId(): string | undefined {
    return this.#workerId;
  }
  /** IN_PROGRESS outputs, in order (the job's own array: read, never change). */
  get progress(): readonly unknown[] {
    return this.#progress;
  }
  /** Stream chunks of the current attempt, in order (the job's own array: read, never change). */
  get stream(): readonly StreamChunk[] {
    return this.#stream;
  }
  get isStream(): boolean | undefined {
    return this.#isStream;
  }
  /** The batch the final job-done named in its query (a batch handler's job), for the dashboard. */
  get batch(): BatchQuery | undefined {
    return this.#batch;
  }
  /** Final results posted after the job was already terminal or deleted (ignored). */
  get duplicateResults(): number {
    return this.#duplicateResults;
  }
  /** Progress and stream posts that arrived after the job ended (ignored). */
  get latePosts(): number {
    return this.#latePosts;
  }
  /** Results, progress and chunks from a worker that did not hold the running or queued job (ignored). */
  get strayPosts(): number {
    return this.#strayPosts;
  }
  /** Times a worker lost this job while running it: it lapsed, or its pings stopped listing the job. */
  get lapses(): number {
    return this.#lapses;
  }

  /** Queued or running, and not deleted: it can still change. */
  isLive(): boolean {
    return this.#state === "IN_QUEUE" || this.#state === "IN_PROGRESS";
  }

  /** Terminal or deleted: results and posts for it are counted and ignored. */
  isEnded(): boolean {
    return !this.isLive();
  }

  /** A client may retry it (`/retry`, the dashboard's Retry): FAILED or TIMED_OUT, not deleted. */
  canRetry(): boolean {
    return RETRYABLE.has(this.#state);
  }

  /** Why {@link canRetry} is false, in the job API's words. */
  whyNoRetry(): string {
    return `job "${this.id}" is ${this.#status}: only FAILED or TIMED_OUT jobs can be retried`;
  }

  /** Running on this worker: the one worker whose results may change it. */
  isRunningOn(workerId: string): boolean {
    return this.#state === "IN_PROGRESS" && this.#workerId === workerId;
  }

  /**
   * True when a post from `workerId` comes from a worker that does not hold the job while it is
   * queued or running on another worker: counted and ignored (docs/harness.md, "Worker routes").
   * Posts for ended jobs are late or duplicate instead.
   */
  isStrayFrom(workerId: string): boolean {
    return this.#state === "IN_QUEUE" || (this.#state === "IN_PROGRESS" && this.#workerId !== workerId);
  }

  /** Handed out to `workerId` at `now`: IN_PROGRESS. */
  start(workerId: string, now: number): void {
    this.#to("IN_PROGRESS");
    this.#startedAt = now;
    this.#workerId = workerId;
  }

  /** Ends the job: its status, output (when the worker sent one) and error, at `now`. */
  finish(end: JobEnd, now: number): void {
    this.#to(end.status);
    this.#finishedAt = now;
    this.#startedAt ??= now;
    this.#output = end.output;
    this.#hasOutput = end.hasOutput ?? false;
    this.#error = end.error;
  }

  /** Records what a final result says besides its output (before {@link finish}). */
  noteResult(facts: ResultFacts): void {
    this.#bytes += facts.bytes ?? 0;
    this.#stopPod = facts.stopPod;
    this.#isStream = facts.isStream;
    this.#batch = facts.batch;
  }

  /** An IN_PROGRESS update; false (counted as late) when the job has ended. */
  addProgress(output: unknown, bytes: number): boolean {
    if (this.isEnded()) {
      this.#latePosts++;
      return false;
    }
    this.#progress.push(output);
    this.#bytes += bytes;
    return true;
  }

  /** A stream chunk; false (counted as late) when the job has ended. */
  addChunk(chunk: StreamChunk, bytes: number): boolean {
    if (this.isEnded()) {
      this.#latePosts++;
      return false;
    }
    this.#stream.push(chunk);
    this.#bytes += bytes;
    return true;
  }

  /** A final result for a job that had already ended (ignored). */
  countDuplicate(): void {
    this.#duplicateResults++;
  }

  /** A post from a worker that does not hold the job (ignored). */
  countStray(): void {
    this.#strayPosts++;
  }

  /** Its worker lost it (lapsed, or stopped listing it); returns how many times that has happened. */
  countLoss(): number {
    return ++this.#lapses;
  }

  /** How many stream chunks `reader` has read. */
  readPosition(reader: string): number {
    return this.#readers.get(reader) ?? 0;
  }

  /** `reader` has read the first `count` chunks. */
  markRead(reader: string, count: number): void {
    this.#readers.set(reader, count);
  }

  /**
   * Back to the queue after a lost attempt or a hand-out that never arrived: what the attempt left
   * goes (its progress stays, as the platform shows it).
   */
  requeue(): void {
    this.#to("IN_QUEUE");
    this.#clearAttempt();
  }

  /** A client retry of a FAILED or TIMED_OUT job: back to the queue, the earlier run forgotten. */
  retry(): void {
    if (!this.canRetry()) throw new RunletError("RUNLET_HARNESS_JOB_STATE", this.whyNoRetry());
    this.#to("IN_QUEUE");
    this.#clearAttempt();
    this.#lapses = 0;
    this.#stopPod = false;
    this.#isStream = undefined;
    this.#batch = undefined;
    this.#progress = [];
  }

  /**
   * Becomes a tombstone: its id, status, times and counters stay, so late results are still
   * recognised and counted — never its input, output, progress or stream, which could be
   * megabytes each. False when it already was one.
   */
  delete(): boolean {
    if (this.#state === "DELETED") return false;
    this.#to("DELETED");
    this.#input = undefined;
    this.#policy = undefined;
    this.#s3Config = undefined;
    this.#webhook = undefined;
    this.#extra = {};
    this.#output = undefined;
    this.#hasOutput = false;
    this.#progress = [];
    this.#stream = [];
    this.#readers.clear();
    // An error text may be as large as a result (20 MiB): a tombstone keeps its first KiB.
    if (this.#error !== undefined && this.#error.length > TOMBSTONE_ERROR_CHARS) {
      this.#error = `${this.#error.slice(0, TOMBSTONE_ERROR_CHARS)}… (cut: the job was deleted)`;
    }
    this.#bytes = 0;
    return true;
  }

  /** What one attempt leaves, cleared for the next. */
  #clearAttempt(): void {
    this.#startedAt = undefined;
    this.#finishedAt = undefined;
    this.#output = undefined;
    this.#hasOutput = false;
    this.#error = undefined;
    this.#workerId = undefined;
    // The next attempt streams from its first item again: keeping this attempt's chunks would hand
    // readers (an open OpenAI stream, /stream) its early items twice.
    this.#stream = [];
    this.#readers.clear();
  }

  /** The one place the state changes; a move the table does not allow is a harness bug. */
  #to(next: JobState): void {
    if (!NEXT[this.#state].includes(next)) {
      throw new RunletError(
        "RUNLET_HARNESS_JOB_STATE",
        `job "${this.id}" cannot go from ${this.#state} to ${next} (a harness bug)`,
        { details: { jobId: this.id, from: this.#state, to: next } },
      );
    }
    this.#state = next;
    if (next !== "DELETED") this.#status = next;
  }
}

/**
 * A job as everything outside the job domain sees it (routes, the dashboard, job lists, the
 * timeline): its getters and questions, none of its moves, so the compiler keeps every change of a
 * job in the store.
 */
export type JobView = Omit<
  JobEntry,
  | "start"
  | "finish"
  | "noteResult"
  | "addProgress"
  | "addChunk"
  | "countDuplicate"
  | "countStray"
  | "countLoss"
  | "markRead"
  | "requeue"
  | "retry"
  | "delete"
>;

/** A job as a job-take hands it out: the entry and its answer, already written as JSON. */
export interface Delivery {
  readonly job: JobEntry;
  readonly json: string;
}

/** A read-only copy of a job for tests and tools (`Harness.job`). */
export interface JobSnapshot {
  readonly id: string;
  readonly endpointId: string;
  readonly kind: JobKind;
  readonly status: JobStatus;
  readonly input: unknown;
  readonly output?: unknown;
  readonly error?: string;
  readonly stopPod: boolean;
  readonly workerId?: string;
  /** IN_PROGRESS outputs, in the order they arrived. */
  readonly progress: readonly unknown[];
  /** Stream chunks, in the order they arrived. */
  readonly stream: readonly StreamChunk[];
  /** The `isStream` query of the final job-done. */
  readonly isStream?: boolean;
  readonly delayTime?: number;
  readonly executionTime?: number;
  /** Final results that arrived after the job had ended (answered 200, ignored). */
  readonly duplicateResults: number;
  /** Progress or stream posts that arrived after the job had ended (answered 200, ignored). */
  readonly latePosts: number;
  /** Results, progress and chunks from a worker that did not hold the job then (answered 200, ignored). */
  readonly strayPosts: number;
  /** True once ttl or result retention removed the job. */
  readonly deleted: boolean;
}

/** Time in the queue, once the job has started. */
function delayTime(job: JobView): number | undefined {
  return job.startedAt === undefined ? undefined : job.startedAt - job.createdAt;
}

/** Time running, once the job has finished. */
function executionTime(job: JobView): number | undefined {
  return job.startedAt === undefined || job.finishedAt === undefined
    ? undefined
    : job.finishedAt - job.startedAt;
}

/** Copies a job for the outside world (arrays copied so callers cannot change the store). */
export function snapshotOf(job: JobView): JobSnapshot {
  const delay = delayTime(job);
  const exec = executionTime(job);
  return {
    id: job.id,
    endpointId: job.endpointId,
    kind: job.kind,
    status: job.status,
    input: job.input,
    ...(job.hasOutput ? { output: job.output } : {}),
    ...(job.error === undefined ? {} : { error: job.error }),
    stopPod: job.stopPod,
    ...(job.workerId === undefined ? {} : { workerId: job.workerId }),
    progress: [...job.progress],
    stream: [...job.stream],
    ...(job.isStream === undefined ? {} : { isStream: job.isStream }),
    ...(delay === undefined ? {} : { delayTime: delay }),
    ...(exec === undefined ? {} : { executionTime: exec }),
    duplicateResults: job.duplicateResults,
    latePosts: job.latePosts,
    strayPosts: job.strayPosts,
    deleted: job.deleted,
  };
}

/**
 * The job record clients see (docs/protocol.md, "Job bodies"): `id`, `status`, `delayTime` once started,
 * `executionTime` once finished, `output` when there is one, `error` when it failed or timed out,
 * and `workerId` while a worker holds it. Never `input`, `s3Config` or `webhook`.
 *
 * While the job runs, `output` is its latest progress update, as the platform shows it: the
 * reference SDK's progress updates (`{status: "IN_PROGRESS", output}` to job-done) exist so that
 * `/status` can show how far a job has come.
 */
export function recordOf(job: JobView): JobRecord {
  const delay = delayTime(job);
  const exec = executionTime(job);
  const latest = job.status === "IN_PROGRESS" ? job.progress.at(-1) : undefined;
  return {
    id: job.id,
    status: job.status,
    ...(delay === undefined ? {} : { delayTime: delay }),
    ...(exec === undefined ? {} : { executionTime: exec }),
    ...(job.hasOutput ? { output: job.output } : latest === undefined ? {} : { output: latest }),
    ...(job.error === undefined ? {} : { error: job.error }),
    ...(job.workerId === undefined ? {} : { workerId: job.workerId }),
  };
}

/**
 * The job as job-take delivers it (docs/protocol.md, "Taking jobs"): `id`, `input`, and everything else the
 * request body held, untouched (docs/protocol.md, "Taking jobs": what the worker does not know passes through).
 */
export function deliveredOf(job: JobView): Record<string, unknown> {
  return {
    id: job.id,
    input: job.input,
    ...job.extra,
    ...(job.policy === undefined ? {} : { policy: job.policy }),
    ...(job.s3Config === undefined ? {} : { s3Config: job.s3Config }),
    ...(job.webhook === undefined ? {} : { webhook: job.webhook }),
  };
}
