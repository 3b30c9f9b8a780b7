import type { ServerResponse } from "node:http";
import { type Health, JOB_STATUSES, type JobList, jobStatusSchema } from "../protocol/api.js";
import { RUNSYNC_WAIT_MS, TTL_MS } from "../protocol/limits.js";
import type { KeyRing } from "./auth.js";
import { hangUpSignal, sendError, sendJson } from "./http-util.js";
import { listItemOf, recentJobs } from "./job-list.js";
import type { JobService, Outcome } from "./job-service.js";
import type { JobStore } from "./job-store.js";
import type { ResolvedOptions } from "./options.js";
import type { RateLimiter } from "./rate-limits.js";
import type { JsonRead } from "./read-json.js";
import { noBody, type Route, type RouteCall, type RouteFamily } from "./route-table.js";

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

/** What the client routes need from the harness. */
export interface ClientRoutesContext {
  readonly store: JobStore;
  /** The job operations behind the routes (shared with the dashboard). */
  readonly jobs: JobService;
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

/**
 * The client routes' family: refusals in the job API's error body, in the order of docs/harness.md
 * ("Client routes"): key (401), endpoint (404), the key's access (403), method (405), rate limit (429).
 */
export function clientFamily(ctx: ClientRoutesContext): RouteFamily {
  return {
    hasEndpoint: (id) => ctx.store.table.hasEndpoint(id),
    refuse({ req, res, url, endpointId }, route, refusal) {
      switch (refusal.reason) {
        case "key":
          return sendError(res, 401, "missing or wrong API key");
        case "endpoint":
          return sendError(res, 404, `endpoint "${endpointId}" not found`);
        case "forbidden":
          return sendError(res, 403, `this API key has no access to endpoint "${endpointId}"`);
        case "method": {
          const method = METHODS[route.name as ClientRoute];
          return sendError(res, 405, `/${route.name} takes ${method}, got ${req.method}`, {
            headers: { allow: method },
          });
        }
        case "path":
          return sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
        default:
          return sendError(res, refusal.status, refusal.message, { headers: { ...refusal.headers } });
      }
    },
  };
}

/** The job API's routes under `/v2/<endpoint>/` (docs/protocol.md, "Job API"). */
export function clientRoutes(ctx: ClientRoutesContext): ReadonlyMap<string, Route> {
  const routes = new Map<string, Route>();
  const limits = ctx.options.limits;
  for (const name of CLIENT_ROUTES) {
    const operation = RATE_OPERATION[name];
    routes.set(name, {
      name,
      auth: (call) => ctx.keys.client(call.req.headers.authorization, call.endpointId),
      methods: () => [METHODS[name]],
      params: (p) => p.length === (WITH_JOB_ID.has(name) ? 1 : 0) && p[0] !== "",
      ...(operation === undefined ? {} : { admit: (call: RouteCall) => admit(ctx, call, operation) }),
      body: () =>
        name === "run" || name === "runsync"
          ? {
              limitBytes: name === "run" ? limits.runBytes : limits.runsyncBytes,
              limitName: `/${name}`,
              maxDepth: limits.maxJsonDepth,
              subject: "request body",
              tooLargeStatus: 413,
              allowEmpty: true,
            }
          : noBody("request body"),
      handle: (call, body) => serveClientRoute(ctx, call, name, body),
    });
  }
  return routes;
}

/** A slot of the route's rate limit (docs/protocol.md, "Limits"), freed when the answer is done; or a 429. */
function admit(ctx: ClientRoutesContext, call: RouteCall, operation: string) {
  const counts = ctx.store.workers.counts(call.endpointId, 0);
  const slot = ctx.limiter.acquire(call.endpointId, operation, counts.idle + counts.running);
  if (!slot.ok) {
    return {
      reason: "rate" as const,
      status: 429,
      message: slot.message,
      headers: { "retry-after": String(slot.retryAfterSec) },
    };
  }
  call.res.once("close", slot.release);
  return undefined;
}

async function serveClientRoute(
  ctx: ClientRoutesContext,
  call: RouteCall,
  route: ClientRoute,
  body: JsonRead,
): Promise<void> {
  const { req, res, url, endpointId } = call;
  const jobId = call.params[0];
  switch (route) {
    case "run":
    case "runsync":
      return submit(ctx, res, url, route, endpointId, body);
    case "health":
      return sendJson(res, 200, ctx.health(endpointId));
    case "requests":
      return listRequests(ctx, res, url, endpointId);
    case "purge-queue":
      return sendJson(res, 200, ctx.jobs.purge(endpointId));
    default:
      return onJob(
        ctx,
        res,
        url,
        route,
        endpointId,
        jobId!,
        readerKey(req.headers.authorization),
        req.method,
      );
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
  res: ServerResponse,
  url: URL,
  route: "run" | "runsync",
  endpointId: string,
  body: JsonRead,
): Promise<void> {
  let wait: number | undefined;
  if (route === "runsync") {
    const param = intParam(url, "wait", RUNSYNC_WAIT_MS.min, RUNSYNC_WAIT_MS.max);
    if (typeof param === "string") return sendError(res, 400, param);
    wait = param;
  }
  if (!body.ok) return sendError(res, body.status, body.message);
  const made = ctx.jobs.submit(endpointId, route, body, wait);
  if (!made.ok) return sendError(res, made.status, made.message, { issues: made.issues });
  // The answer says IN_QUEUE even when a waiting worker took the job at once, as the platform's does.
  if (route === "run") return sendJson(res, 200, { id: made.value.id, status: "IN_QUEUE" });
  const answer = await ctx.jobs.awaitRecord(
    endpointId,
    made.value.id,
    wait ?? RUNSYNC_WAIT_MS.default,
    hangUpSignal(res),
  );
  return answer.ok ? sendJson(res, 200, answer.value) : sendError(res, answer.status, answer.message);
}

async function onJob(
  ctx: ClientRoutesContext,
  res: ServerResponse,
  url: URL,
  route: ClientRoute,
  endpointId: string,
  jobId: string,
  reader: string,
  method: string | undefined,
): Promise<void> {
  // An unknown job is a 404 before its query parameters are looked at.
  if (ctx.jobs.find(jobId, endpointId) === undefined) {
    return sendError(res, 404, `job "${jobId}" not found (unknown, or expired)`);
  }
  const send = <T>(answer: Outcome<T>, body: (value: T) => unknown = (v) => v) =>
    answer.ok ? sendJson(res, 200, body(answer.value)) : sendError(res, answer.status, answer.message);
  switch (route) {
    case "status": {
      const ttl = intParam(url, "ttl", 1, TTL_MS.max);
      if (typeof ttl === "string") return sendError(res, 400, ttl);
      return send(ctx.jobs.status(endpointId, jobId, ttl));
    }
    case "status-sync": {
      const wait = intParam(url, "wait", RUNSYNC_WAIT_MS.min, RUNSYNC_WAIT_MS.max);
      if (typeof wait === "string") return sendError(res, 400, wait);
      return send(
        await ctx.jobs.awaitRecord(endpointId, jobId, wait ?? RUNSYNC_WAIT_MS.default, hangUpSignal(res)),
      );
    }
    case "stream":
      return send(await ctx.jobs.stream(endpointId, jobId, reader, hangUpSignal(res)));
    case "cancel":
      return send(ctx.jobs.cancel(jobId, endpointId), (job) => ({ id: job.id, status: job.status }));
    case "retry":
      return send(ctx.jobs.retry(jobId, endpointId), (job) => ({ id: job.id, status: "IN_QUEUE" }));
    default:
      return sendError(res, 404, `no route for ${method} ${url.pathname}`);
  }
}
