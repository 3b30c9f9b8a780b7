import { z } from "zod";
import { isRunletError, RunletError, type RunletErrorCode } from "../errors.js";
import type { ErrorReport } from "../protocol/index.js";
import { VERSION } from "../version.js";

/**
 * Turns what a handler did (returned, threw, yielded) into the result posted for it
 * (docs/protocol.md, "Results"). Runs on the side that ran the handler, so an error's class and stack are
 * still known when it becomes text (they would not survive a thread boundary).
 */

/** A job's final result, ready for the wire. */
export type JobResult =
  | {
      readonly kind: "output";
      /** The output's JSON text. */
      readonly json: string;
      /** A streaming job: the final post uses `isStream=true`. */
      readonly stream: boolean;
      readonly stopPod: boolean;
    }
  | {
      readonly kind: "error";
      /** The string posted as `error`. */
      readonly message: string;
      readonly code: RunletErrorCode;
      readonly stopPod: boolean;
    };

/** Who is reporting, for the JSON error report. */
export interface ReportIdentity {
  readonly hostname: string;
  readonly workerId: string;
}

/** JSON text of `value`; RUNLET_OUTPUT_UNSERIALIZABLE (naming `what`) when JSON cannot represent it. */
export function toJsonText(value: unknown, what: string): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new RunletError(
      "RUNLET_OUTPUT_UNSERIALIZABLE",
      `${what} cannot be serialised to JSON: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  if (json === undefined) {
    throw new RunletError(
      "RUNLET_OUTPUT_UNSERIALIZABLE",
      `${what} cannot be serialised to JSON: a ${typeof value} has no JSON form`,
    );
  }
  return json;
}

/** True for `{ error: "..." }`: a plain object whose only defined key is a string `error`. */
export function isErrorReturn(value: unknown): value is { error: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const record = value as Record<string, unknown>;
  if (typeof record["error"] !== "string") return false;
  return Object.keys(record).every((key) => key === "error" || record[key] === undefined);
}

/** The result of a handler that returned `value` (undefined becomes `null`, so the body always has `output`). */
export function returnedResult(value: unknown, stopPod: boolean): JobResult {
  if (isErrorReturn(value))
    return { kind: "error", message: value.error, code: "RUNLET_JOB_FAILED", stopPod };
  try {
    return {
      kind: "output",
      json: toJsonText(value === undefined ? null : value, "the output"),
      stream: false,
      stopPod,
    };
  } catch (err) {
    return failedResult(err, { hostname: "", workerId: "" }, stopPod);
  }
}

/** The platform's error report for a thrown value (docs/protocol.md, "Results"); non-Error values too. */
export function errorReport(thrown: unknown, identity: ReportIdentity): ErrorReport {
  let type: string;
  let message: string;
  let traceback: string;
  if (thrown instanceof Error) {
    type = thrown.name || thrown.constructor?.name || "Error";
    message = thrown.message;
    traceback = thrown.stack ?? `${type}: ${message}`;
  } else {
    type =
      thrown === null
        ? "null"
        : typeof thrown === "object"
          ? (thrown.constructor?.name ?? "Object")
          : typeof thrown;
    try {
      message = typeof thrown === "string" ? thrown : (JSON.stringify(thrown) ?? String(thrown));
    } catch {
      // A cycle or BigInt inside the thrown value: String() still says something useful.
      message = String(thrown);
    }
    traceback = `(no traceback: a non-Error value was thrown: ${type})`;
  }
  return {
    error_type: type,
    error_message: message,
    error_traceback: traceback,
    hostname: identity.hostname,
    worker_id: identity.workerId,
    runpod_version: `runlet/${VERSION}`,
  };
}

/** Codes whose message is the whole story: posted as is, without a traceback report. */
const PLAIN_MESSAGE_CODES: ReadonlySet<RunletErrorCode> = new Set<RunletErrorCode>([
  "RUNLET_JOB_FAILED",
  "RUNLET_INPUT_INVALID",
  "RUNLET_OUTPUT_UNSERIALIZABLE",
  "RUNLET_OUTPUT_TOO_LARGE",
  "RUNLET_JOB_TIMEOUT",
  "RUNLET_JOB_SHUTDOWN",
  "RUNLET_WORKER_UNFIT",
  "RUNLET_BATCH_OUTPUTS",
]);

/**
 * Codes of what the caller sent that could not be fetched (a refused, failed, too large or too
 * slow URL download): the caller's fault, not the handler's, so they fail the job with a plain
 * message that starts with the code, no traceback report (issue 54, item 4).
 */
const CALLER_CODES: ReadonlySet<RunletErrorCode> = new Set<RunletErrorCode>([
  "RUNLET_S3_DOWNLOAD_REFUSED",
  "RUNLET_S3_ENDPOINT_REFUSED",
  "RUNLET_S3_DOWNLOAD_TOO_LARGE",
  "RUNLET_S3_DOWNLOAD_TIMEOUT",
  "RUNLET_URL_DOWNLOAD_HTTP",
  "RUNLET_URL_DOWNLOAD_FAILED",
]);

/**
 * The result of a handler that threw `thrown`: a JobError fails with its own message (and
 * `refreshWorker` → stopPod); runlet's job-level errors keep their message; a download the caller
 * asked for that failed is `<code>: <message>`; anything else becomes the JSON error report text.
 */
export function failedResult(thrown: unknown, identity: ReportIdentity, stopPod: boolean): JobResult {
  if (isRunletError(thrown) && CALLER_CODES.has(thrown.code)) {
    return { kind: "error", message: `${thrown.code}: ${thrown.message}`, code: thrown.code, stopPod };
  }
  if (isRunletError(thrown) && PLAIN_MESSAGE_CODES.has(thrown.code)) {
    const refresh = (thrown as { refreshWorker?: unknown }).refreshWorker === true;
    return { kind: "error", message: thrown.message, code: thrown.code, stopPod: stopPod || refresh };
  }
  return {
    kind: "error",
    message: JSON.stringify(errorReport(thrown, identity)),
    code: "RUNLET_JOB_HANDLER_THREW",
    stopPod,
  };
}

/** The error message for an input that failed the handler's schema: every bad field and why. */
export function inputErrorMessage(error: z.ZodError): string {
  return `input is invalid:\n${z.prettifyError(error)}`;
}

/** The job-done body text for a final result. */
export function finalBodyText(result: JobResult): string {
  const stopPod = result.stopPod ? ',"stopPod":true' : "";
  if (result.kind === "output") return `{"output":${result.json}${stopPod}}`;
  return `{"error":${JSON.stringify(result.message)}${stopPod}}`;
}
