import type { Health, JobRecord, JobRef, RunRequest, StreamChunk } from "../protocol/index.js";
import type { TraceContextField } from "../telemetry/trace-context.js";

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (and any back-off or poll it is in); it then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/** A `/run` or `/runsync` body (docs/protocol.md, "Job bodies") with a typed `input`. */
export type RunBody<TInput> = Omit<RunRequest, "input"> & {
  input: TInput;
  /**
   * W3C trace context for the worker's spans (docs/observability.md). @default the active span's,
   * when the application has set up OpenTelemetry with a propagator; else none
   */
  traceContext?: TraceContextField;
};

/** A job record (docs/protocol.md, "Job bodies") with a typed `output`. */
export type TypedJobRecord<TOutput> = JobRecord & { output?: TOutput };

/** Options of `runsync`. */
export interface RunsyncOptions extends CallOptions {
  /** How long the server holds the request for the job to finish, in ms (1000–300000). @default the server's (90_000) */
  readonly waitMs?: number;
}

/** Options of `status`. */
export interface StatusOptions extends CallOptions {
  /** Sets the job's time-to-live, in ms (`?ttl=`). @default unchanged */
  readonly ttlMs?: number;
}

/** Options of `wait`. */
export interface WaitOptions extends CallOptions {
  /** Give up (RUNLET_CLIENT_TIMEOUT) after this long, in ms. @default 600_000 */
  readonly timeoutMs?: number;
  /** Pause between `/status` polls, in ms. @default 1_000 */
  readonly pollIntervalMs?: number;
}

/** Options of `stream` and `streamChunks`. */
export interface StreamOptions extends CallOptions {
  /** Pause before polling `/stream` again after an answer with no chunks, in ms. @default 250 */
  readonly pollIntervalMs?: number;
  /**
   * Least time between the starts of two `/stream` reads while chunks keep coming, in ms: each
   * read then carries every chunk made meanwhile, and one reader stays at ≤ 100 reads a second,
   * well within the platform's `/stream` rate limit (2000 per 10 s per endpoint). 0 reads again
   * at once after every answer. @default 10
   */
  readonly readIntervalMs?: number;
}

/** `/purge-queue` answer. */
export interface PurgeResult {
  readonly removed: number;
  readonly status: "completed";
}

/** The job API of one endpoint (docs/protocol.md, "Job API"). */
export interface EndpointClient<TInput = Record<string, unknown>, TOutput = unknown, TStreamItem = unknown> {
  /** The endpoint id. */
  readonly id: string;
  /** Queues a job (`POST /run`); answers at once with its id and `IN_QUEUE`. Never retried. */
  run(body: RunBody<TInput>, options?: CallOptions): Promise<JobRef>;
  /**
   * Runs a job and waits for it (`POST /runsync?wait=`). The record may still be `IN_QUEUE` or
   * `IN_PROGRESS` when the wait runs out: then `wait(record.id)`. Never retried.
   */
  runsync(body: RunBody<TInput>, options?: RunsyncOptions): Promise<TypedJobRecord<TOutput>>;
  /** Reads a job's record (`GET /status/<id>`). */
  status(jobId: string, options?: StatusOptions): Promise<TypedJobRecord<TOutput>>;
  /** Polls `/status` until the job is terminal and returns its final record (FAILED included). */
  wait(jobId: string, options?: WaitOptions): Promise<TypedJobRecord<TOutput>>;
  /**
   * The values the handler yielded, in order and whole (split chunks reassembled; yielded bytes come
   * back as a Buffer). Throws RUNLET_CLIENT_JOB_FAILED after the last value if the job did not
   * complete. Read a job's stream with one reader: each chunk is delivered once.
   */
  stream(jobId: string, options?: StreamOptions): AsyncGenerator<TStreamItem, void, undefined>;
  /** The raw chunks `{output, metrics}` as `/stream` delivers them, with the same ending as `stream`. */
  streamChunks(jobId: string, options?: StreamOptions): AsyncGenerator<StreamChunk, void, undefined>;
  /** Cancels a queued or running job (`POST /cancel/<id>`). Never retried. */
  cancel(jobId: string, options?: CallOptions): Promise<JobRef>;
  /** Requeues a FAILED or TIMED_OUT job under the same id (`POST /retry/<id>`). Never retried. */
  retry(jobId: string, options?: CallOptions): Promise<JobRef>;
  /** Removes every waiting job (`POST /purge-queue`); running jobs go on. Never retried. */
  purgeQueue(options?: CallOptions): Promise<PurgeResult>;
  /** Job and worker counts (`GET /health`). */
  health(options?: CallOptions): Promise<Health>;
}
