import type { Harness, JobEvent } from "../harness/index.js";

/** Longest preview of an output or stream item in a log line, in characters. */
const PREVIEW_CHARS = 120;

function preview(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? "undefined");
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

/** One readable line for a job event: progress, stream item, or the end with status and timings. */
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
      const result =
        job.status === "COMPLETED"
          ? "output" in job
            ? `output ${preview(job.output)}`
            : ""
          : job.error === undefined
            ? ""
            : `error ${preview(job.error)}`;
      return `${label} ${job.status} ${timing} ${result}`.trimEnd();
    }
  }
}

/**
 * Prints one readable line per job event of every endpoint of the harness, as it happens (what
 * `runlet dev` shows beside the workers' own lines). It follows the harness's job events rather
 * than its recorded requests, so nothing is missed once old records are dropped. `stop()` ends it.
 */
export function followJobs(
  harness: Pick<Harness, "onJobEvent">,
  print: (line: string) => void,
): { stop(): void } {
  const stop = harness.onJobEvent((event) => print(describeJobEvent(event)));
  return { stop };
}
