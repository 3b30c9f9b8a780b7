/**
 * Every error runlet raises carries a stable `code` (`RUNLET_<AREA>_<WHAT>`). Match on `code`,
 * not `instanceof`: two copies of the package in one process break `instanceof`.
 * docs/errors.md lists each code; a test keeps the two in agreement.
 */

/** Every stable error code, with the one-line meaning that docs/errors.md expands on. */
export const ERROR_CODES = {
  // configuration and handler definition
  RUNLET_CONFIG_INVALID: "An option or environment variable has a bad value.",
  RUNLET_HANDLER_INVALID: "defineHandler() was given bad options.",
  RUNLET_HANDLER_LOAD: "A handler module could not be loaded or has no defineHandler() default export.",
  // one job
  RUNLET_INPUT_INVALID: "A job's input failed the handler's schema.",
  RUNLET_JOB_FAILED: "The handler failed the job on purpose (JobError or a returned { error }).",
  RUNLET_JOB_TIMEOUT: "The job ran past its execution timeout.",
  RUNLET_JOB_STOPPED: "The platform asked the worker to stop the job (job-stop).",
  RUNLET_JOB_SHUTDOWN: "The worker shut down before the job finished.",
  RUNLET_JOB_HANDLER_THREW: "The handler threw (or rejected with) a value.",
  RUNLET_JOB_THREAD_DIED: "The isolation thread running the job exited unexpectedly.",
  RUNLET_BATCH_OUTPUTS: "A batch handler returned something other than one output per job.",
  RUNLET_OUTPUT_UNSERIALIZABLE: "The handler's output cannot be turned into JSON.",
  RUNLET_OUTPUT_TOO_LARGE: "An output is over the size the platform accepts and no store is configured.",
  RUNLET_WORKER_UNFIT:
    "The worker found itself unfit (a failed health check); it pings unhealthy and exits 1.",
  RUNLET_WORKER_CRASHED:
    "An error escaped every owner (an uncaught exception or rejection); the worker logged its stack, pinged unhealthy with check=crash and exited 1.",
  RUNLET_WORKER_EXITED:
    "Code other than the worker's (a handler) called process.exit() while the worker ran: one fatal line names the jobs in flight, and the process exits non-zero.",
  RUNLET_WORKER_STATE:
    "A worker part (a job, a batch member, the worker, an isolation thread) was asked for a move its state table does not allow: a runlet bug.",
  RUNLET_TASK_FAILED:
    "A background task (a cache sync, a telemetry export, a log write, a stream pipe) failed; logged once, the worker goes on.",
  RUNLET_SIDECAR_FAILED:
    "A sidecar (model server) did not start, did not answer within readyTimeoutMs, or exited while the worker ran.",
  // talking to the platform
  RUNLET_PROTOCOL_BAD_JOB: "The platform delivered a job without an id or input.",
  RUNLET_REPORT_REJECTED: "The platform refused a result with a 4xx; the worker reported why instead.",
  RUNLET_REPORT_GAVE_UP: "A result could not be delivered before the worker had to exit.",
  RUNLET_REQUEST_REFUSED:
    "The HTTP client refused a request before sending it (a URL or header it cannot carry).",
  RUNLET_REQUEST_REDIRECTS:
    "A request to the platform was redirected more than 10 times (a loop); it counts as a network error.",
  // streaming
  RUNLET_STREAM_REASSEMBLY: "Stream chunks could not be put back together (missing or out-of-order parts).",
  // S3
  RUNLET_S3_NOT_CONFIGURED: "ctx.s3 was used without a job s3Config or BUCKET_* environment.",
  RUNLET_S3_REQUEST_FAILED: "The S3-compatible store refused or failed a request.",
  RUNLET_S3_DOWNLOAD_REFUSED: "A download URL points at a private or loopback address that is not allowed.",
  RUNLET_S3_DOWNLOAD_TOO_LARGE: "A download is larger than its size cap.",
  RUNLET_S3_DOWNLOAD_TIMEOUT: "A download did not finish within its timeout.",
  RUNLET_URL_DOWNLOAD_HTTP:
    "A URL download was answered with an HTTP status other than 200 (details.status).",
  RUNLET_URL_DOWNLOAD_FAILED: "A URL download got no answer: the connection failed, or its redirects looped.",
  RUNLET_S3_ENDPOINT_REFUSED:
    "A job's s3Config.endpointUrl points at a private or loopback address that is not allowed.",
  // clients
  RUNLET_CLIENT_HTTP: "The job API answered with an error status.",
  RUNLET_CLIENT_TIMEOUT: "A client wait ran out before the job finished.",
  RUNLET_CLIENT_BAD_RESPONSE: "The job API answered 2xx with a body of the wrong shape.",
  RUNLET_CLIENT_JOB_FAILED: "A streamed job ended FAILED, TIMED_OUT or CANCELLED.",
  RUNLET_MANAGEMENT_HTTP: "The management API answered with an error status.",
  RUNLET_MANAGEMENT_INVALID: "A management request body failed client-side validation.",
  RUNLET_MANAGEMENT_BAD_RESPONSE: "The management API answered 2xx with a body of the wrong shape.",
  RUNLET_MANAGEMENT_NETWORK: "The management API could not be reached or did not answer in time.",
  RUNLET_MANAGEMENT_ROLLOUT_TIMEOUT: "An endpoint's release did not reach every worker within the wait.",
  // harness and CLI
  RUNLET_HARNESS_CONFIG: "The harness was given bad options.",
  RUNLET_HARNESS_NO_JOB: "Harness.stopJob or waitForJob named a job the harness does not know.",
  RUNLET_HARNESS_JOB_DELETED:
    "Harness.waitForJob's job was deleted (ttl, retention, purge, its endpoint removed) before it ended.",
  RUNLET_HARNESS_WAIT_TIMEOUT: "Harness.waitForJob ran out of time before the job ended.",
  RUNLET_HARNESS_JOB_STATE:
    "A harness job was asked for a change its lifecycle does not allow (a retry of a job that is not FAILED or TIMED_OUT).",
  RUNLET_CLI_USAGE: "A CLI command was called with bad arguments.",
  RUNLET_CLI_NO_PLATFORM: "`runlet start` or a built bundle ran without the platform's environment.",
  RUNLET_CLI_UNEXPECTED: "A CLI command failed on an error runlet did not expect; its stack follows.",
  RUNLET_NODE_TOO_OLD:
    "runlet or a bundle was started on a Node older than its floor (22.19); it refuses to start.",
  RUNLET_CLI_WORKER_EXITED: "`runlet test`'s worker process exited before its job ended.",
  RUNLET_CLI_VENDOR_FAILED:
    "`runlet init` could not put runlet's tarball into the new project's vendor/ folder.",
  RUNLET_WARM_CACHE_FAILED: "The warm cache could not hydrate or sync and `warmCache.strict` is set.",
  RUNLET_MISSING_PEER: "runlet needs an optional package (esbuild, tsx, the AWS SDK) that is not installed.",
  RUNLET_BUILD_FAILED: "Bundling a handler with esbuild failed.",
  RUNLET_MODEL_NOT_CACHED:
    "A cached model (resolveCachedModel, an hf: source) is not in the model cache; the message lists what the cache holds.",
} as const;

/** A stable runlet error code. */
export type RunletErrorCode = keyof typeof ERROR_CODES;

/** Options accepted by every runlet error. */
export interface RunletErrorOptions {
  /** The error that led to this one. */
  cause?: unknown;
  /** Structured facts about the failure (the field, the limit, the value). */
  details?: Record<string, unknown>;
}

/**
 * The base of every error runlet raises.
 *
 * @example
 * try { await client.endpoint("e").status("x") } catch (err) {
 *   if (isRunletError(err) && err.code === "RUNLET_CLIENT_HTTP") { ... }
 * }
 */
export class RunletError extends Error {
  readonly code: RunletErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: RunletErrorCode, message: string, options: RunletErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RunletError";
    this.code = code;
    this.details = options.details;
  }
}

/** Options for failing a job on purpose. */
export interface JobErrorOptions extends RunletErrorOptions {
  /** Ask the platform to replace this worker after the job (`stopPod` on the wire). @default false */
  refreshWorker?: boolean;
}

/**
 * Throw from a handler to fail the job with exactly this message (no traceback report).
 *
 * @example
 * if (!input.url.startsWith("https:")) throw new JobError("url must use https");
 */
export class JobError extends RunletError {
  readonly refreshWorker: boolean;

  constructor(message: string, options: JobErrorOptions = {}) {
    super("RUNLET_JOB_FAILED", message, options);
    this.name = "JobError";
    this.refreshWorker = options.refreshWorker ?? false;
  }
}

/** True when `value` is a runlet error (by its code, so it works across package copies). */
export function isRunletError(value: unknown): value is RunletError {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { code?: unknown }).code === "string" &&
    Object.hasOwn(ERROR_CODES, (value as { code: string }).code)
  );
}
