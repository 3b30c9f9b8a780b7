import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { usageError } from "./command.js";

/** What `runlet test` reads (its jobs) and how it describes a failed job for a human. */

/** Most jobs one `runlet test` submits. */
export const MAX_JOBS = 1_024;

/** The job request: `input` plus whatever else the SDK convention allows beside it. */
export type JobRequest = { readonly input: unknown } & Readonly<Record<string, unknown>>;

/**
 * Reads the job, or the jobs: one `{"input": ...}` object, or an array of them, which `runlet
 * test` submits together so a batch handler takes them as one batch.
 */
export async function readJobs(given: string | undefined, cwd: string): Promise<JobRequest[] | JobRequest> {
  let text: string;
  let source: string;
  if (given === undefined) {
    source = "test_input.json";
    try {
      text = await readFile(join(cwd, source), "utf8");
    } catch {
      throw usageError(`no --input given and no test_input.json in ${cwd}; pass --input '{"input": {...}}'`);
    }
  } else {
    source = "--input";
    text = given;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw usageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  const isJob = (value: unknown) =>
    typeof value === "object" && value !== null && !Array.isArray(value) && "input" in value;
  if (Array.isArray(parsed)) {
    if (parsed.length === 0 || parsed.length > MAX_JOBS || !parsed.every(isJob)) {
      throw usageError(
        `${source}: a list of jobs must hold 1 to ${MAX_JOBS} objects with an "input" key, like [{"input": {"text": "a"}}, {"input": {"text": "b"}}]`,
      );
    }
    return parsed as JobRequest[];
  }
  if (!isJob(parsed)) {
    throw usageError(
      `${source} must be a JSON object with an "input" key, like {"input": {"name": "Ada"}}, or a list of them`,
    );
  }
  return parsed as JobRequest;
}

/** A failed job's error for a human, with the code it goes by (docs/errors.md). */
export function describeFailure(
  status: string,
  error: string | undefined,
): { text: string; code: string; trace: string } {
  if (error === undefined) return { text: "(no error message)", code: "RUNLET_JOB_FAILED", trace: "" };
  try {
    // The platform's error report of a handler that threw is JSON text: show its parts.
    const report = JSON.parse(error) as Record<string, unknown>;
    if (typeof report["error_message"] === "string") {
      const type = typeof report["error_type"] === "string" ? `${report["error_type"]}: ` : "";
      const trace = typeof report["error_traceback"] === "string" ? `${report["error_traceback"]}\n` : "";
      return { text: `${type}${report["error_message"]}`, code: "RUNLET_JOB_HANDLER_THREW", trace };
    }
  } catch {
    // A plain string error (JobError, invalid input, a timeout): shown as it is.
  }
  // The wire carries no code; the worker's own messages start in a fixed way (handler/execute.ts, worker/run-job.ts).
  const code =
    status === "TIMED_OUT" || error.startsWith("job timed out after ")
      ? "RUNLET_JOB_TIMEOUT"
      : error.startsWith("input is invalid:")
        ? "RUNLET_INPUT_INVALID"
        : "RUNLET_JOB_FAILED";
  return { text: error, code, trace: "" };
}
