import type { Harness, RecordedRequest } from "../harness/index.js";

/** Longest preview of an output or stream item in a log line, in characters. */
const PREVIEW_CHARS = 120;

function preview(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? "undefined");
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

function parseBody(body: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined; // A body the harness rejected; the worker's own log says why.
  }
}

/**
 * Turns the harness's record of worker requests into one readable line per job event (progress,
 * stream item, finish with status and timings) for `runlet dev`. It polls, because the harness
 * records requests rather than emitting events; `stop()` ends the polling.
 */
export function followJobs(
  harness: Harness,
  print: (line: string) => void,
  pollMs = 200,
): { stop(): void; flush(): void } {
  const done = new Set<number>();
  let firstOpen = 0;
  const streamCounts = new Map<string, number>();

  function describe(r: RecordedRequest): string | undefined {
    const jobId = r.path.split("/").at(-1) ?? "?";
    if (r.status !== 200) return undefined;
    if (r.route === "job-stream") {
      const n = (streamCounts.get(jobId) ?? 0) + 1;
      streamCounts.set(jobId, n);
      const body = parseBody(r.body);
      return `job ${jobId} stream #${n} ${preview(body?.["output"])}`;
    }
    if (r.route === "job-done") {
      const body = parseBody(r.body);
      if (body?.["status"] === "IN_PROGRESS") return `job ${jobId} progress ${preview(body["output"])}`;
      streamCounts.delete(jobId);
      const job = harness.job(jobId);
      if (job === undefined) return `job ${jobId} finished`;
      const timing = `in ${job.executionTime ?? "?"} ms (queued ${job.delayTime ?? "?"} ms)`;
      const result =
        job.status === "COMPLETED"
          ? `output ${preview(job.output)}`
          : job.error === undefined
            ? ""
            : `error ${preview(job.error)}`;
      return `job ${jobId} ${job.status} ${timing} ${result}`.trimEnd();
    }
    return undefined;
  }

  function flush(): void {
    const records = harness.requests();
    for (let i = firstOpen; i < records.length; i++) {
      const r = records[i];
      if (r === undefined || done.has(i) || r.status === "pending") continue;
      done.add(i);
      const line = describe(r);
      if (line !== undefined) print(line);
    }
    while (done.has(firstOpen)) done.delete(firstOpen++);
  }

  const timer = setInterval(flush, pollMs);
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    flush,
  };
}
