import type { IncomingMessage, ServerResponse } from "node:http";
import { type Health, JOB_STATUSES, type JobList, jobStatusSchema } from "../protocol/api.js";
import { RUNSYNC_WAIT_MS, TTL_MS } from "../protocol/limits.js";
import type { KeyRing } from "./auth.js";
import { hangUpSignal, readBody, sendError, sendJson } from "./http-util.js";
import { recordOf } from "./job-entry.js";
import { listItemOf, recentJobs } from "./job-list.js";
import type { JobStore } from "./job-store.js";
import type { ResolvedOptions } from "./options.js";
import type { RateLimiter } from "./rate-limits.js";
import { parseRunBody } from "./run-body.js";
import { readStream } from "./stream-reader.js";

/** The client-facing job routes under `/v2/<endpoint>` (docs/protocol.md, "Job API", with `/status-sync`). */
export const CLIENT_ROUTES = [
  "run",
  "runsync",
  "status",
  "status-sync",
  "stream",
  "cancel",
  "retry",
  "purge-queue",
  "health",
  "requests",
] as const;
export type ClientRoute = (typeof CLIENT_ROUTES)[number];

/** True when `name` is a client route. */
export function isClientRoute(name: string | undefined): name is ClientRoute {
  return (CLIENT_ROUTES as readonly string[]).includes(name ?? "");
}

/** What the client routes need from the harness. */
export interface ClientRoutesContext {
  readonly store: JobStore;
  readonly keys: KeyRing;
  readonly limiter: RateLimiter;
  readonly options: ResolvedOptions;
  readonly health: (endpointId: string) => Health;
}

const METHODS: Readonly<Record<ClientRoute, "GET" | "POST">> = {
  run: "POST",
  runsync: "POST",
  status: "GET",
  "status-sync": "GET",
  stream: "GET",
  cancel: "POST",
  retry: "POST",
  "purge-queue": "POST",
  health: "GET",
  requests: "GET",
};
const WITH_JOB_ID: ReadonlySet<ClientRoute> = new Set(["status", "status-sync", "stream", "cancel", "retry"]);
/** The rate-limit operation of a route (docs/protocol.md, "Rate limits"); routes not listed there are not limited. */
const RATE_OPERATION: Partial<Record<ClientRoute, string>> = {
  run: "run",
  runsync: "runsync",
  status: "status",
  "status-sync": "status",
  stream: "stream",
  cancel: "cancel",
  "purge-queue": "purge-queue",
  requests: "requests",
};
/** Bodies of cancel, retry and purge-queue carry nothing; clients send `{}`. */
const EMPTY_BODY_LIMIT_BYTES = 65_536;

/** Parses an integer query parameter within bounds; returns the value, undefined when absent, or an error text. */
function intParam(url: URL, name: string, min: number, max: number): number | undefined | string {
  const raw = url.searchParams.get(name);
  if (raw === null) return undefined;
  const value = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(value) || value < min || value > max) {
    return `${name} must be an integer between ${min} and ${max} ms, got ${JSON.stringify(raw)}`;
  }
  return value;
}

/** Serves one client route; auth, endpoint, method and rate limits are checked first, in that order. */
export async function handleClientRoute(
  ctx: ClientRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: ClientRoute,
  endpointId: string,
  rest: readonly string[],
): Promise<void> {
  const auth = ctx.keys.client(req.headers.authorization, endpointId);
  if (auth === "unauthorized") return sendError(res, 401, "missing or wrong API key");
  if (!ctx.store.table.hasEndpoint(endpointId))
    return sendError(res, 404, `endpoint "${endpointId}" not found`);
  if (auth === "forbidden")
    return sendError(res, 403, `this API key has no access to endpoint "${endpointId}"`);
  if (req.method !== METHODS[route]) {
    return sendError(res, 405, `/${route} takes ${METHODS[route]}, got ${req.method}`, {
      headers: { allow: METHODS[route] },
    });
  }
  const jobId = rest[0];
  if (rest.length !== (WITH_JOB_ID.has(route) ? 1 : 0) || jobId === "") {
    return sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
  }
  const operation = RATE_OPERATION[route];
  if (operation !== undefined) {
    const counts = ctx.store.workers.counts(endpointId, 0);
    const slot = ctx.limiter.acquire(endpointId, operation, counts.idle + counts.running);
    if (!slot.ok) {
      return sendError(res, 429, slot.message, { headers: { "retry-after": String(slot.retryAfterSec) } });
    }
    res.once("close", slot.release);
  }
  const reader = readerKey(req.headers.authorization);
  switch (route) {
    case "run":
    case "runsync":
      return submit(ctx, req, res, url, route, endpointId);
    case "health":
      return sendJson(res, 200, ctx.health(endpointId));
    case "requests":
      return listRequests(ctx, res, url, endpointId);
    case "purge-queue": {
      await readBody(req, EMPTY_BODY_LIMIT_BYTES);
      return sendJson(res, 200, { removed: ctx.store.purge(endpointId), status: "completed" });
    }
    default:
      return onJob(ctx, req, res, url, route, endpointId, jobId!, reader);
  }
}

/** `GET /requests[?status=S]`: the endpoint's recent jobs, newest first (runlet's own shape, docs/harness.md). */
function listRequests(ctx: ClientRoutesContext, res: ServerResponse, url: URL, endpointId: string): void {
  const raw = url.searchParams.get("status");
  const status = raw === null ? undefined : jobStatusSchema.safeParse(raw);
  if (status !== undefined && !status.success) {
    sendError(res, 400, `status must be one of ${JOB_STATUSES.join(", ")}, got ${JSON.stringify(raw)}`);
    return;
  }
  const jobs = recentJobs(ctx.store.table, endpointId, { status: status?.data });
  const body: JobList = { requests: jobs.map(listItemOf) };
  sendJson(res, 200, body);
}

/** Stream reads are tracked per reader: the key the caller authenticated with. */
function readerKey(header: string | undefined): string {
  const value = (header ?? "").trim();
  return /^Bearer\s+(.+)$/i.exec(value)?.[1] ?? value;
}

async function submit(
  ctx: ClientRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: "run" | "runsync",
  endpointId: string,
): Promise<void> {
  const limits = ctx.options.limits;
  let waitMs: number = RUNSYNC_WAIT_MS.default;
  let retentionMs = limits.runRetentionMs;
  if (route === "runsync") {
    const wait = intParam(url, "wait", RUNSYNC_WAIT_MS.min, RUNSYNC_WAIT_MS.max);
    if (typeof wait === "string") return sendError(res, 400, wait);
    waitMs = wait ?? RUNSYNC_WAIT_MS.default;
    // docs/protocol.md, "Limits": sync results are kept 1 min, extendable up to 5 min through `wait`.
    retentionMs =
      wait === undefined
        ? limits.runsyncRetentionMs
        : Math.min(Math.max(wait, limits.runsyncRetentionMs), limits.runsyncMaxRetentionMs);
  }
  const limit = route === "run" ? limits.runBytes : limits.runsyncBytes;
  const body = await readBody(req, limit);
  if (!body.ok && body.tooLarge) {
    return sendError(res, 413, `request body is over the /${route} limit of ${limit} bytes`);
  }
  if (!body.ok) return sendError(res, 400, "request body is not valid UTF-8 JSON");
  const parsed = parseRunBody(body.text);
  if (!parsed.ok) return sendError(res, 400, parsed.message, { issues: parsed.issues });
  const job = ctx.store.create(endpointId, route, parsed.job, retentionMs);
  // The answer says IN_QUEUE even when a waiting worker took the job at once, as the platform's does.
  if (route === "run") return sendJson(res, 200, { id: job.id, status: "IN_QUEUE" });
  await waitForEnd(ctx, job.id, waitMs, hangUpSignal(res));
  // Deleted while waiting (its ttl, a purge, its endpoint removed): gone, as /status would say.
  if (job.deleted) return sendError(res, 404, `job "${job.id}" not found (unknown, or expired)`);
  sendJson(res, 200, recordOf(job));
}

/** Waits (real time) until the job is terminal or deleted, the wait runs out, or the client hangs up. */
async function waitForEnd(ctx: ClientRoutesContext, jobId: string, waitMs: number, signal: AbortSignal) {
  const until = Date.now() + waitMs;
  for (;;) {
    const job = ctx.store.table.get(jobId);
    if (job === undefined || job.deleted || (job.status !== "IN_QUEUE" && job.status !== "IN_PROGRESS"))
      return;
    const left = until - Date.now();
    if (left <= 0 || signal.aborted || ctx.store.waits.closed) return;
    await ctx.store.waits.next(jobId, left, signal);
  }
}

async function onJob(
  ctx: ClientRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: ClientRoute,
  endpointId: string,
  jobId: string,
  reader: string,
): Promise<void> {
  if (route === "cancel" || route === "retry") await readBody(req, EMPTY_BODY_LIMIT_BYTES);
  const job = ctx.store.table.visible(endpointId, jobId);
  if (job === undefined) return sendError(res, 404, `job "${jobId}" not found (unknown, or expired)`);
  switch (route) {
    case "status": {
      const ttl = intParam(url, "ttl", 1, TTL_MS.max);
      if (typeof ttl === "string") return sendError(res, 400, ttl);
      if (ttl !== undefined) ctx.store.setTtl(job, ttl);
      return sendJson(res, 200, recordOf(job));
    }
    case "status-sync": {
      const wait = intParam(url, "wait", RUNSYNC_WAIT_MS.min, RUNSYNC_WAIT_MS.max);
      if (typeof wait === "string") return sendError(res, 400, wait);
      await waitForEnd(ctx, job.id, wait ?? RUNSYNC_WAIT_MS.default, hangUpSignal(res));
      if (job.deleted) return sendError(res, 404, `job "${jobId}" not found (unknown, or expired)`);
      return sendJson(res, 200, recordOf(job));
    }
    case "stream": {
      const answer = await readStream(
        ctx.store,
        job,
        reader,
        ctx.options.streamHoldMs,
        hangUpSignal(res),
        ctx.options.streamGatherMs,
      );
      if (answer === undefined) return sendError(res, 404, `job "${jobId}" not found (unknown, or expired)`);
      return sendJson(res, 200, answer);
    }
    case "cancel":
      ctx.store.cancel(job);
      return sendJson(res, 200, { id: job.id, status: job.status });
    case "retry":
      if (job.status !== "FAILED" && job.status !== "TIMED_OUT") {
        return sendError(
          res,
          400,
          `job "${jobId}" is ${job.status}: only FAILED or TIMED_OUT jobs can be retried`,
        );
      }
      ctx.store.retry(job);
      return sendJson(res, 200, { id: job.id, status: "IN_QUEUE" });
    default:
      return sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
  }
}
