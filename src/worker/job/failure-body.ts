import { finalBodyText } from "../../handler/outcome.js";

/** The final job-done body for a job the worker fails itself (bad job, extra batch item, watchdog). */
export function failureBody(message: string, stopPod = false): string {
  return finalBodyText({ kind: "error", message, code: "RUNLET_JOB_FAILED", stopPod });
}
