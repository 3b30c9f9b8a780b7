import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { usageError } from "./command.js";

/** What `runlet test` reads: its job, or a list of jobs. */

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
