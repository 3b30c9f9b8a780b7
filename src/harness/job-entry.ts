import type { JobRecord, JobStatus, RunRequest } from "../protocol/api.js";
import type { BatchQuery } from "../protocol/batch-query.js";
import type { Policy } from "../protocol/job.js";
import type { StreamChunk } from "../protocol/worker-bodies.js";
import type { ClockTimer } from "./clock.js";

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

/** A job inside the store. Mutable; only the store changes it. */
export interface JobEntry {
  readonly id: string;
  readonly endpointId: string;
  readonly kind: JobKind;
  /** The request's data; dropped (undefined, empty) when the job is deleted: see {@link toTombstone}. */
  input: unknown;
  policy: Policy | undefined;
  s3Config: JobS3Config | undefined;
  webhook: string | undefined;
  /** Unknown top-level keys of the request body, delivered as they came. */
  extra: Readonly<Record<string, unknown>>;
  /** Bytes of the bodies it was made of: its request, progress updates, stream chunks and result. */
  bytes: number;
  status: JobStatus;
  createdAt: number;
  startedAt: number | undefined;
  finishedAt: number | undefined;
  output: unknown;
  hasOutput: boolean;
  error: string | undefined;
  stopPod: boolean;
  workerId: string | undefined;
  progress: unknown[];
  stream: StreamChunk[];
  isStream: boolean | undefined;
  /** The batch the final job-done named in its query (a batch handler's job), for the dashboard. */
  batch: BatchQuery | undefined;
  /** Final results posted after the job was already terminal or deleted (ignored). */
  duplicateResults: number;
  /** Progress and stream posts that arrived after the job ended (ignored). */
  latePosts: number;
  /** Results, progress and chunks from a worker that did not hold the running or queued job (ignored). */
  strayPosts: number;
  /** Times a worker lost this job while running it: it lapsed, or its pings stopped listing the job. */
  lapses: number;
  /** Set when ttl or retention removed the job: clients get 404, late results are still counted. */
  deleted: boolean;
  /** Result retention after completion, ms. */
  retentionMs: number;
  /** Per reader (API key): how many stream chunks it has read. */
  readonly readers: Map<string, number>;
  ttlTimer: ClockTimer | undefined;
  executionTimer: ClockTimer | undefined;
  retentionTimer: ClockTimer | undefined;
}

/** A new job, IN_QUEUE, created at `now`. */
export function newJobEntry(
  id: string,
  endpointId: string,
  kind: JobKind,
  spec: NewJob,
  now: number,
  retentionMs: number,
): JobEntry {
  return {
    id,
    endpointId,
    kind,
    input: spec.input,
    policy: spec.policy,
    s3Config: spec.s3Config,
    webhook: spec.webhook,
    extra: Object.fromEntries(Object.entries(spec.extra ?? {}).filter(([k]) => !OWN_KEYS.has(k))),
    bytes: spec.bytes ?? 0,
    status: "IN_QUEUE",
    createdAt: now,
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
    batch: undefined,
    duplicateResults: 0,
    latePosts: 0,
    strayPosts: 0,
    lapses: 0,
    deleted: false,
    retentionMs,
    readers: new Map(),
    ttlTimer: undefined,
    executionTimer: undefined,
    retentionTimer: undefined,
  };
}

/** Clears what one attempt left on a job going back to the queue (timers are the store's). */
export function markQueued(job: JobEntry): void {
  job.status = "IN_QUEUE";
  job.startedAt = undefined;
  job.finishedAt = undefined;
  job.output = undefined;
  job.hasOutput = false;
  job.error = undefined;
  job.workerId = undefined;
  // The next attempt streams from its first item again: keeping this attempt's chunks would hand
  // readers (an open OpenAI stream, /stream) its early items twice.
  job.stream = [];
  job.readers.clear();
}

/** Also forgets what a retried job's earlier run produced: progress, chunks, readers, flags. */
export function clearForRetry(job: JobEntry): void {
  job.lapses = 0;
  job.stopPod = false;
  job.isStream = undefined;
  job.batch = undefined;
  job.progress = [];
  job.stream = [];
  job.readers.clear();
}

/**
 * What is kept of a deleted job (purge, ttl, retention, its endpoint removed): its id, status,
 * times and counters, so late results are still recognised and counted — never its input, output,
 * progress or stream, which could be megabytes each.
 */
export function toTombstone(job: JobEntry): void {
  job.input = undefined;
  job.policy = undefined;
  job.s3Config = undefined;
  job.webhook = undefined;
  job.extra = {};
  job.output = undefined;
  job.hasOutput = false;
  job.progress = [];
  job.stream = [];
  job.readers.clear();
  // An error text may be as large as a result (20 MiB): a tombstone keeps its first KiB.
  if (job.error !== undefined && job.error.length > TOMBSTONE_ERROR_CHARS) {
    job.error = `${job.error.slice(0, TOMBSTONE_ERROR_CHARS)}… (cut: the job was deleted)`;
  }
  job.bytes = 0;
}

/** How much of a deleted job's error text its tombstone keeps, in UTF-16 units. */
const TOMBSTONE_ERROR_CHARS = 1_024;

/** A job as a job-take hands it out: the entry and its answer, already written as JSON. */
export interface Delivery {
  readonly job: JobEntry;
  readonly json: string;
}

/** Records a job's end at `now`: its status, output (when the worker sent one) and error. */
export function markFinished(
  job: JobEntry,
  status: JobStatus,
  fields: { output?: unknown; hasOutput?: boolean; error?: string },
  now: number,
): void {
  job.status = status;
  job.finishedAt = now;
  job.startedAt ??= now;
  job.output = fields.output;
  job.hasOutput = fields.hasOutput ?? false;
  job.error = fields.error;
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
function delayTime(job: JobEntry): number | undefined {
  return job.startedAt === undefined ? undefined : job.startedAt - job.createdAt;
}

/** Time running, once the job has finished. */
function executionTime(job: JobEntry): number | undefined {
  return job.startedAt === undefined || job.finishedAt === undefined
    ? undefined
    : job.finishedAt - job.startedAt;
}

/** Copies a job for the outside world (arrays copied so callers cannot change the store). */
export function snapshotOf(job: JobEntry): JobSnapshot {
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
export function recordOf(job: JobEntry): JobRecord {
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
export function deliveredOf(job: JobEntry): Record<string, unknown> {
  return {
    id: job.id,
    input: job.input,
    ...job.extra,
    ...(job.policy === undefined ? {} : { policy: job.policy }),
    ...(job.s3Config === undefined ? {} : { s3Config: job.s3Config }),
    ...(job.webhook === undefined ? {} : { webhook: job.webhook }),
  };
}
