import type { JobListItem, JobStatus } from "../../protocol/api.js";
import type { BatchQuery } from "../../protocol/batch-query.js";
import type { StreamChunk } from "../../protocol/worker-bodies.js";
import type { WorkerState } from "../fleet/worker-registry.js";
import type { WorkerStartup } from "../fleet/worker-startup.js";
import type { RateState } from "../http/rate-limits.js";
import { deliveredOf, type JobView } from "../jobs/job-entry.js";
import { listItemOf } from "../jobs/job-list.js";
import type { JobLookup } from "../jobs/job-table.js";
import type { TimelineSpan } from "../jobs/job-timeline.js";
import type { WebhookAttempt } from "../jobs/webhooks.js";

/** What the dashboard shows in place of a secret. */
export const MASKED = "[redacted]";

/**
 * A job in the dashboard's table: `/requests`'s item plus its endpoint and how it was submitted;
 * `deleted` once ttl, retention, a purge or its endpoint's removal deleted it (the page drops it).
 */
export type JobRow = JobListItem & {
  readonly endpointId: string;
  readonly kind: "run" | "runsync";
  readonly deleted?: true;
};

/** Jobs that ended with each terminal status since the harness started (a retried job counts each end). */
export type EndCounts = Record<Exclude<JobStatus, "IN_QUEUE" | "IN_PROGRESS">, number>;

/** One endpoint's line on the page. */
export interface EndpointView {
  readonly id: string;
  /** Waiting jobs without and with `policy.lowPriority`. */
  readonly queue: { readonly normal: number; readonly low: number };
  readonly inProgress: number;
  readonly ended: EndCounts;
  /** Rate-limit state per operation (empty when limits are off). */
  readonly rateLimits: readonly RateState[];
  /** Worker processes that exited on their own and were replaced (`runlet dev` reports them). */
  readonly restarts: number;
}

/**
 * One worker's line: connected (from the registry) or lapsed (remembered by the dashboard);
 * `starting` while its start-up runs, connected or not yet (docs/harness.md, "Workers starting"),
 * and `exited` once its process ended.
 */
export interface WorkerView {
  readonly id: string;
  readonly endpointId: string;
  readonly state: "connected" | "lapsed" | "starting" | "exited";
  /** While starting: the phase it is in (`fitness`, `cache`, `sidecar`, `setup`). */
  readonly phase?: string;
  /** While starting: setup's latest progress text. */
  readonly progress?: string;
  /** Once ready: each start-up phase's ms (docs/worker.md, "Start-up phases"). */
  readonly phases?: Readonly<Record<string, number>>;
  /** ISO time of its latest ping; absent before its first. */
  readonly lastPingAt?: string;
  /** Ids of the jobs it holds. */
  readonly jobs: readonly string[];
  /** Set when its last ping said `status=unhealthy`. */
  readonly unhealthy?: string;
}

/** Everything the job view shows. */
export interface JobDetail extends JobRow {
  /** The job as its worker receives it (`input`, `policy`, `s3Config`, `webhook`, …), s3Config secrets masked. */
  readonly request: Record<string, unknown>;
  readonly output?: unknown;
  /** The error text; a handler's error report is JSON text (docs/protocol.md, "Results"), which the page lays out. */
  readonly error?: string;
  readonly progress: readonly unknown[];
  readonly stream: readonly StreamChunk[];
  readonly webhookAttempts: readonly WebhookAttempt[];
  /** Times a worker lost the job while running it. */
  readonly lapses: number;
  /** The batch it ran in (a batch handler's job): id, size, and how long it waited in it, ms. */
  readonly batch?: BatchQuery;
  /** The handler's own metrics (`ctx.metrics`), when its worker reported them (`runlet dev` does). */
  readonly metrics?: Readonly<Record<string, number | string>>;
  /** The job's timeline as the harness saw it (docs/observability.md, "The harness's timeline"). */
  readonly timeline?: readonly TimelineSpan[];
}

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** A job's row in the table. */
export function jobRowOf(job: JobView): JobRow {
  return {
    ...listItemOf(job),
    endpointId: job.endpointId,
    kind: job.kind,
    ...(job.deleted ? { deleted: true as const } : {}),
  };
}

/** The delivered job with `s3Config`'s access key and secret masked (the API never shows s3Config at all). */
export function maskedRequest(job: JobView): Record<string, unknown> {
  const request = deliveredOf(job);
  const s3 = request["s3Config"];
  if (typeof s3 === "object" && s3 !== null && !Array.isArray(s3)) {
    const masked: Record<string, unknown> = { ...s3 };
    for (const key of Object.keys(masked)) {
      if (/secret|accessid|password|token/i.test(key)) masked[key] = MASKED;
    }
    request["s3Config"] = masked;
  }
  return request;
}

/** The job view's data. */
export function jobDetailOf(
  job: JobView,
  webhookAttempts: readonly WebhookAttempt[],
  metrics?: Readonly<Record<string, number | string>>,
  timeline?: readonly TimelineSpan[],
): JobDetail {
  return {
    ...jobRowOf(job),
    request: maskedRequest(job),
    ...(job.hasOutput ? { output: job.output } : {}),
    ...(job.error === undefined ? {} : { error: job.error }),
    progress: [...job.progress],
    stream: [...job.stream],
    webhookAttempts: webhookAttempts.filter((a) => a.jobId === job.id),
    lapses: job.lapses,
    ...(job.batch === undefined ? {} : { batch: job.batch }),
    ...(metrics === undefined ? {} : { metrics }),
    ...(timeline === undefined ? {} : { timeline }),
  };
}

/** One endpoint's line. */
export function endpointViewOf(
  table: JobLookup,
  id: string,
  ended: EndCounts,
  rateLimits: readonly RateState[],
  restarts: number,
): EndpointView {
  let low = 0;
  const queued = table.queued(id);
  for (const job of queued) if (job.policy?.lowPriority === true) low++;
  return {
    id,
    queue: { normal: queued.length - low, low },
    inProgress: table.counts(id).inProgress,
    ended,
    rateLimits,
    restarts,
  };
}

/** A connected worker's line, with its start-up when its spawner reports one. */
export function workerViewOf(
  worker: WorkerState,
  state: "connected" | "lapsed",
  startup?: WorkerStartup,
): WorkerView {
  const lastPingAt = iso(worker.lastPingAt);
  const shown =
    state === "lapsed"
      ? state
      : startup?.state === "starting" || startup?.state === "exited"
        ? startup.state
        : state;
  return {
    id: worker.id,
    endpointId: worker.endpointId,
    state: shown,
    ...(startup === undefined ? {} : startupFields(startup)),
    ...(lastPingAt === undefined ? {} : { lastPingAt }),
    jobs: state === "connected" ? [...worker.jobs] : [],
    ...(worker.unhealthy === undefined ? {} : { unhealthy: worker.unhealthy }),
  };
}

function startupFields(startup: WorkerStartup): Pick<WorkerView, "phase" | "progress" | "phases"> {
  return {
    ...(startup.phase === undefined ? {} : { phase: startup.phase }),
    ...(startup.progress === undefined ? {} : { progress: startup.progress }),
    ...(startup.phases === undefined ? {} : { phases: startup.phases }),
  };
}

/** A worker that is starting and has not connected yet (it made no request so far). */
export function startingWorkerViewOf(endpointId: string, id: string, startup: WorkerStartup): WorkerView {
  return { id, endpointId, state: "starting", ...startupFields(startup), jobs: [] };
}

/**
 * The workers of an endpoint: the connected ones (with their start-up), then those starting and
 * not connected yet. What the dashboard lists and `Harness.workers()` returns.
 */
export function workerViewsOf(
  endpointId: string,
  connected: readonly WorkerState[],
  startups: ReadonlyArray<readonly [string, WorkerStartup]>,
): WorkerView[] {
  const byId = new Map(startups);
  const views = connected.map((w) => workerViewOf(w, "connected", byId.get(w.id)));
  const ids = new Set(connected.map((w) => w.id));
  for (const [id, startup] of startups) {
    if (!ids.has(id) && startup.state === "starting")
      views.push(startingWorkerViewOf(endpointId, id, startup));
  }
  return views;
}

/** No ends yet. */
export function noEnds(): EndCounts {
  return { COMPLETED: 0, FAILED: 0, CANCELLED: 0, TIMED_OUT: 0 };
}
