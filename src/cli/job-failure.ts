/** A failed job's error for a human: its text, the code it goes by (docs/errors.md), and a stack when it has one. */
export interface JobFailure {
  /** `RangeError: the dial only goes to 10`, or the plain error text (which may span lines). */
  readonly text: string;
  readonly code: string;
  /** The handler's stack, ending in a newline; empty when there is none. */
  readonly trace: string;
}

/**
 * Reads a failed job's error as `runlet test` and `runlet dev` print it: a handler that threw left
 * the platform's error report (JSON text, docs/protocol.md "Results"), whose type, message and
 * stack are shown apart; any other error is plain text.
 */
export function describeFailure(status: string, error: string | undefined): JobFailure {
  if (error === undefined) return { text: "(no error message)", code: "RUNLET_JOB_FAILED", trace: "" };
  try {
    const report = JSON.parse(error) as Record<string, unknown>;
    if (typeof report["error_message"] === "string") {
      const type = typeof report["error_type"] === "string" ? `${report["error_type"]}: ` : "";
      const trace = typeof report["error_traceback"] === "string" ? `${report["error_traceback"]}\n` : "";
      return { text: `${type}${report["error_message"]}`, code: "RUNLET_JOB_HANDLER_THREW", trace };
    }
  } catch {
    // A plain string error (JobError, invalid input, a timeout): shown as it is.
  }
  // The wire carries no code; the worker's own messages start in a fixed way (handler/execute.ts, worker/job/job-clock.ts).
  const code =
    status === "TIMED_OUT" || error.startsWith("job timed out after ")
      ? "RUNLET_JOB_TIMEOUT"
      : error.startsWith("input is invalid:")
        ? "RUNLET_INPUT_INVALID"
        : "RUNLET_JOB_FAILED";
  return { text: error, code, trace: "" };
}
