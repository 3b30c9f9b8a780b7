import type { ServerResponse } from "node:http";
import { type Health, JOB_STATUSES, type JobList, jobStatusSchema } from "../../protocol/api.js";
import { RUNSYNC_WAIT_MS, TTL_MS } from "../../protocol/limits.js";
import type { KeyRing } from "../http/auth.js";
import { hangUpSignal, sendError, sendJson } from "../http/http-util.js";
import { type RateLimiter, rateAdmission } from "../http/rate-limits.js";
import type { ReadJsonOptions } from "../http/read-json.js";
import {
  headerOf,
  type ParsedBody,
  type RouteCall,
  type RouteFamily,
  routeOf,
  routesOf,
  tableOf,
} from "../http/route-table.js";
import { listItemOf, recentJobs } from "../jobs/job-list.js";
import type { JobService, Outcome } from "../jobs/job-service.js";
import type { JobStore } from "../jobs/job-store.js";
import type { ResolvedOptions } from "../options.js";

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

const route = routeOf<ClientRoutesContext, "client">();

/** How `/run` and `/runsync` bodies are read: their byte limit, the nesting limit, an empty body allowed. */
const jobBody =
  (name: "run" | "runsync") =>
  (ctx: ClientRoutesContext): ReadJsonOptions => ({
    limitBytes: name === "run" ? ctx.options.limits.runBytes : ctx.options.limits.runsyncBytes,
    limitName: `/${name}`,
    maxDepth: ctx.options.limits.maxJsonDepth,
    subject: "request body",
    tooLargeStatus: 413,
    allowEmpty: true,
  });

/** The routes on one job, `<name>/:jobId`, served by {@link onJob}. */
type JobRouteName = "status" | "status-sync" | "stream" | "cancel" | "retry";
const onJobRoute =
  (name: JobRouteName) =>
  (ctx: ClientRoutesContext, { req, res, url, endpointId, params }: RouteCall<":jobId">): Promise<void> =>
    onJob(ctx, res, url, name, endpointId, params.jobId, readerKey(req.headers.authorization), req.method);

/**
 * The job API's routes under `/v2/<endpoint>/` (docs/protocol.md, "Job API", with `/status-sync`
 * and `/requests`), each with its rate-limit row (docs/protocol.md, "Rate limits"; `/status-sync`
 * counts as `/status`; `/retry` and `/health` are not limited). Adding a route is one entry here.
 */
export const CLIENT_ROUTE_TABLE = tableOf<ClientRoutesContext, "client">()({
  run: route({
    method: "POST",
    path: "run",
    access: "client",
    rate: "run",
    body: jobBody("run"),
    handle: (ctx, { res, url, endpointId }, body) => submit(ctx, res, url, "run", endpointId, body),
  }),
  runsync: route({
    method: "POST",
    path: "runsync",
    access: "client",
    rate: "runsync",
    body: jobBody("runsync"),
    handle: (ctx, { res, url, endpointId }, body) => submit(ctx, res, url, "runsync", endpointId, body),
  }),
  status: route({
    method: "GET",
    path: "status/:jobId",
    access: "client",
    rate: "status",
    body: "none",
    handle: onJobRoute("status"),
  }),
  "status-sync": route({
    method: "GET",
    path: "status-sync/:jobId",
    access: "client",
    rate: "status",
    body: "none",
    handle: onJobRoute("status-sync"),
  }),
  stream: route({
    method: "GET",
    path: "stream/:jobId",
    access: "client",
    rate: "stream",
    body: "none",
    handle: onJobRoute("stream"),
  }),
  cancel: route({
    method: "POST",
    path: "cancel/:jobId",
    access: "client",
    rate: "cancel",
    body: "none",
    handle: onJobRoute("cancel"),
  }),
  retry: route({
    method: "POST",
    path: "retry/:jobId",
    access: "client",
    rate: "unlimited",
    body: "none",
    handle: onJobRoute("retry"),
  }),
  "purge-queue": route({
    method: "POST",
    path: "purge-queue",
    access: "client",
    rate: "purge-queue",
    body: "none",
    handle: (ctx, { res, endpointId }) => sendJson(res, 200, ctx.jobs.purge(endpointId)),
  }),
  health: route({
    method: "GET",
    path: "health",
    access: "client",
    rate: "unlimited",
    body: "none",
    handle: (ctx, { res, endpointId }) => sendJson(res, 200, ctx.health(endpointId)),
  }),
  requests: route({
    method: "GET",
    path: "requests",
    access: "client",
    rate: "requests",
    body: "none",
    handle: (ctx, { res, url, endpointId }) => listRequests(ctx, res, url, endpointId),
  }),
});
export type ClientRoute = keyof typeof CLIENT_ROUTE_TABLE;
/** The client-facing job routes under `/v2/<endpoint>` (docs/protocol.md, "Job API", with `/status-sync`). */
export const CLIENT_ROUTES = Object.keys(CLIENT_ROUTE_TABLE) as ClientRoute[];

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
 * The checks every client-keyed family shares (the job API's and the OpenAI routes'): the client
 * key of the call's endpoint, the endpoint's existence, and its rate rows, whose dynamic rule counts
 * the endpoint's connected workers.
 */
export function clientChecks(ctx: {
  readonly store: JobStore;
  readonly keys: KeyRing;
  readonly limiter: RateLimiter;
}): Pick<RouteFamily<unknown, "client">, "defaultAccess" | "authorize" | "hasEndpoint" | "admit"> {
  return {
    defaultAccess: "client",
    authorize: (_access, request) =>
      ctx.keys.client(headerOf(request.headers, "authorization"), request.endpointId),
    hasEndpoint: (id) => ctx.store.table.hasEndpoint(id),
    admit: rateAdmission(ctx.limiter, (id) => {
      const counts = ctx.store.workers.counts(id, 0);
      return counts.idle + counts.running;
    }),
  };
}

/**
 * The client routes' family: refusals in the job API's error body, in the router's order
 * (docs/harness.md, "Routes"): key (401), endpoint (404), the key's access (403), path (404),
 * method (405), rate limit (429).
 */
export function clientFamily(ctx: ClientRoutesContext): RouteFamily<ClientRoutesContext, "client"> {
  return {
    name: "client",
    mount: "/v2/:endpoint/",
    claims: "named",
    context: ctx,
    routes: routesOf(CLIENT_ROUTE_TABLE),
    ...clientChecks(ctx),
    refuse({ req, res, url, endpointId }, refusal) {
      switch (refusal.reason) {
        case "key":
          return sendError(res, 401, "missing or wrong API key");
        case "endpoint":
          return sendError(res, 404, `endpoint "${endpointId}" not found`);
        case "forbidden":
          return sendError(res, 403, `this API key has no access to endpoint "${endpointId}"`);
        case "malformed":
          return sendError(res, 400, `malformed path: ${url.pathname}`);
        case "method": {
          const method = refusal.allow.join(", ");
          return sendError(res, 405, `/${refusal.pattern.split("/")[0]} takes ${method}, got ${req.method}`, {
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
  body: ParsedBody,
): Promise<void> {
  let wait: number | undefined;
  if (route === "runsync") {
    const param = intParam(url, "wait", RUNSYNC_WAIT_MS.min, RUNSYNC_WAIT_MS.max);
    if (typeof param === "string") return sendError(res, 400, param);
    wait = param;
  }
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
  route: JobRouteName,
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
