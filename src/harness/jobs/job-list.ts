import type { JobListItem, JobStatus } from "../../protocol/api.js";
import type { JobView } from "./job-entry.js";
import type { JobLookup } from "./job-table.js";

/** Most jobs `GET /v2/<endpoint>/requests` lists. */
export const MAX_LISTED_JOBS = 100;

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** A job as `/requests` lists it: id, status, times and worker; never input or output. */
export function listItemOf(job: JobView): JobListItem {
  const startedAt = iso(job.startedAt);
  const finishedAt = iso(job.finishedAt);
  return {
    id: job.id,
    status: job.status,
    createdAt: iso(job.createdAt)!,
    ...(startedAt === undefined ? {} : { startedAt }),
    ...(finishedAt === undefined ? {} : { finishedAt }),
    ...(job.startedAt === undefined ? {} : { delayTime: job.startedAt - job.createdAt }),
    ...(job.startedAt === undefined || job.finishedAt === undefined
      ? {}
      : { executionTime: job.finishedAt - job.startedAt }),
    ...(job.workerId === undefined ? {} : { workerId: job.workerId }),
  };
}

/**
 * The endpoint's jobs that clients can still see (not deleted by ttl or retention), newest first,
 * at most `max`, only those in `status` when given.
 */
export function recentJobs(
  table: JobLookup,
  endpointId: string,
  options: { readonly status?: JobStatus | undefined; readonly max?: number } = {},
): JobView[] {
  const max = options.max ?? MAX_LISTED_JOBS;
  const jobs = table.liveJobsOf(endpointId);
  const out: JobView[] = [];
  // The table keeps creation order; a retried job keeps its place (its createdAt does not change).
  for (let i = jobs.length - 1; i >= 0 && out.length < max; i--) {
    const job = jobs[i]!;
    if (options.status === undefined || job.status === options.status) out.push(job);
  }
  return out;
}
