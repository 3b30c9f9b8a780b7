import type { Harness, JobEvent } from "../harness/index.js";
import { describeFailure } from "./job-failure.js";
import { formatLogLine, type LogRecord, parseLogLine } from "./log-line.js";
import { escapeControl } from "./terminal-text.js";

/** Longest preview of an output or stream item in a log line, in characters. */
const PREVIEW_CHARS = 120;
/** Workers' `Finished.` lines held until their job's end is printed, and ended jobs remembered; the oldest go first. */
const MAX_TRACKED_JOBS = 1_000;

function preview(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? "undefined");
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

/**
 * One readable line for a job event: progress, stream item, or the end with status and timings. A
 * failure is printed as `runlet test` prints it: the error's type and message (on as many lines as
 * it has), its code, then the handler's stack.
 */
export function describeJobEvent(event: JobEvent): string {
  const label = `job ${event.jobId}`;
  switch (event.type) {
    case "progress":
      return `${label} progress ${preview(event.output)}`;
    case "stream":
      return `${label} stream #${event.index} ${preview(event.chunk.output)}`;
    case "end": {
      const { job } = event;
      const timing = `in ${job.executionTime ?? "?"} ms (queued ${job.delayTime ?? "?"} ms)`;
      if (job.status === "COMPLETED") {
        return `${label} ${job.status} ${timing}${"output" in job ? ` output ${preview(job.output)}` : ""}`;
      }
      if (job.error === undefined) return `${label} ${job.status} ${timing}`;
      const failure = describeFailure(job.status, job.error);
      return `${label} ${job.status} ${timing}: ${failure.text} (${failure.code})\n${failure.trace}`.trimEnd();
    }
  }
}

/** What {@link followJobs} needs of the harness. */
export type JobLogHarness = Pick<Harness, "onJobEvent" | "reportJobMetrics">;

/** A running job log: `workerLine` takes each line a worker prints; `stop()` ends it. */
export interface JobLog {
  /** Prints a worker's line behind `prefix`, readable; a `Finished.` line waits for its job's end and gives the dashboard its metrics. */
  workerLine(prefix: string, line: string, record?: LogRecord): void;
  stop(): void;
}

/**
 * Prints one readable line per job event of every endpoint of the harness, as it happens, beside
 * the workers' own lines (what `runlet dev` shows). It follows the harness's job events rather
 * than its recorded requests, so nothing is missed once old records are dropped. A worker logs
 * `Finished.` before the harness has its last stream items, so that line is held until the
 * job's end and printed just before it.
 */
export function followJobs(harness: JobLogHarness, printRaw: (line: string) => void): JobLog {
  // Every line here carries text from a job (outputs, errors, what a handler logged): its terminal
  // control characters are escaped, so a job cannot retitle the window or forge a line.
  const print = (line: string): void => printRaw(escapeControl(line));
  const held = new Map<string, string>();
  const ended = new Set<string>();
  const bounded = (collection: Map<string, string> | Set<string>, onDrop?: (key: string) => void) => {
    if (collection.size <= MAX_TRACKED_JOBS) return;
    const oldest = collection.keys().next().value!;
    onDrop?.(oldest);
    collection.delete(oldest);
  };
  const stop = harness.onJobEvent((event) => {
    if (event.type === "end") {
      const line = held.get(event.jobId);
      if (line !== undefined) print(line);
      held.delete(event.jobId);
      ended.add(event.jobId);
      bounded(ended);
    }
    print(describeJobEvent(event));
  });
  return {
    workerLine(prefix, line, record = parseLogLine(line)) {
      const jobId = record?.["requestId"];
      if (record?.["message"] !== "Finished." || typeof jobId !== "string") {
        return print(`${prefix}${formatLogLine(line, record)}`);
      }
      // The job's end line right after it shows the error readably; here it would be escaped JSON.
      const { error: _, ...rest } = record;
      const text = `${prefix}${formatLogLine(line, rest)}`;
      const metrics = record["metrics"];
      if (typeof metrics === "object" && metrics !== null && Object.keys(metrics).length > 0) {
        harness.reportJobMetrics(jobId, metrics as Record<string, number | string>);
      }
      if (ended.has(jobId)) return print(text);
      held.set(jobId, text);
      bounded(held, (id) => print(held.get(id)!));
    },
    stop() {
      stop();
      for (const line of held.values()) print(line);
      held.clear();
    },
  };
}
