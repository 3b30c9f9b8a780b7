import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import { readBatchQuery } from "../../protocol/batch-query.js";
import { type StreamChunk, streamChunkSchema } from "../../protocol/worker-bodies.js";
import { sleep } from "../../wait.js";
import type { WorkerRegistry, WorkerState } from "../fleet/worker-registry.js";
import type { KeyRing } from "../http/auth.js";
import { hangUpSignal, sendEmpty, sendError, sendJson } from "../http/http-util.js";
import type { JsonRead, ReadJsonOptions } from "../http/read-json.js";
import {
  headerOf,
  type ParsedBody,
  type Refusal,
  type RouteCall,
  type RouteFamily,
  routeOf,
  routesOf,
  tableOf,
} from "../http/route-table.js";
import type { JobStore } from "../jobs/job-store.js";
import type { LogEntry, RequestLog, WorkerRoute } from "./request-log.js";
import { parseStreamBody } from "./stream-body.js";

/** What the worker routes need from the harness. */
export interface WorkerRoutesContext {
  readonly store: JobStore;
  readonly requests: RequestLog;
  readonly keys: KeyRing;
  /** How long job-take and job-stop polls are held, ms (real time). */
  readonly takeTimeoutMs: number;
  /** Largest job-done body, bytes; larger answers 400 as the platform does. */
  readonly jobDoneBytes: number;
  /** Largest job-stream body, bytes. */
  readonly streamBodyBytes: number;
  /** Most levels of objects and arrays a job-done or job-stream body may nest. */
  readonly maxJsonDepth: number;
  /** A worker posted `stopPod: true` (the scaler replaces workers it started). */
  readonly onStopPod: (endpointId: string, workerId: string) => void;
  /** Where ignored posts from a worker that does not hold the job are reported (warn). */
  readonly logger: Logger | undefined;
}

const JSON_TYPES: ReadonlySet<string> = new Set(["application/json", "application/x-www-form-urlencoded"]);

/**
 * Each request's entry in the request log, kept on its response while its route serves it. A
 * property, not a WeakMap: a WeakMap's set cost about 1.7 µs a request in the c64 profile
 * (docs/benchmarks.md, "Issue 35's redesign of the harness, before and after").
 */
const RECORD = Symbol("runlet.requestRecord");
type RecordedResponse = ServerResponse & { [RECORD]?: LogEntry };

/** Sets the status a request's log entry shows. */
function answer(res: ServerResponse, status: number | "dropped"): void {
  const record = (res as RecordedResponse)[RECORD];
  if (record !== undefined) record.status = status;
}

const route = routeOf<WorkerRoutesContext, "worker">();

/** How job-done and job-stream bodies are read: JSON or form-encoded, under their limits (400 past them, as the platform). */
const resultBody = (name: "job-done" | "job-stream") => {
  // Made once per harness's context, not once a request.
  let made: { readonly ctx: WorkerRoutesContext; readonly options: ReadJsonOptions } | undefined;
  return (ctx: WorkerRoutesContext): ReadJsonOptions => {
    if (made?.ctx !== ctx) {
      const options: ReadJsonOptions = {
        limitBytes: name === "job-done" ? ctx.jobDoneBytes : ctx.streamBodyBytes,
        maxDepth: ctx.maxJsonDepth,
        subject: `${name} body`,
        tooLargeStatus: 400,
        types: JSON_TYPES,
        ...(name === "job-stream" ? { parse: parseStreamBody } : {}),
      };
      made = { ctx, options };
    }
    return made.options;
  };
};

/** The worker a request comes from, as the registry knows it (a take counts as its first take). */
function workerOf(ctx: WorkerRoutesContext, call: RouteCall<":workerId">, takes: boolean): WorkerState {
  return ctx.store.workers.seen(call.endpointId, call.params.workerId, takes);
}

/** The result routes: job-done and job-stream, applied by {@link result}. */
const resultRoute =
  (name: "job-done" | "job-stream") =>
  (ctx: WorkerRoutesContext, call: RouteCall<":workerId/:jobId">, body: ParsedBody): void => {
    const { res, url, endpointId, params } = call;
    workerOf(ctx, call, false);
    const outcome = result(ctx, url, name, endpointId, params.workerId, params.jobId, body.value, body.bytes);
    answer(res, outcome.status);
    if (outcome.message !== undefined) sendError(res, outcome.status, outcome.message);
    else sendAccepted(res);
  };

/** The headers of the `{}` a result route answers with; node:http reads them and keeps no reference. */
const ACCEPTED_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-type": "application/json",
  "content-length": "2",
});

/** Answers 200 `{}` (what `sendJson(res, 200, {})` writes, without serialising `{}` a request). */
function sendAccepted(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(200, ACCEPTED_HEADERS);
  res.end("{}");
}

/** The job-take routes (one job, or a batch). */
const takeRoute =
  (name: "job-take" | "job-take-batch") =>
  (ctx: WorkerRoutesContext, call: RouteCall<":workerId">): Promise<void> =>
    take(ctx, call.res, call.url, name, workerOf(ctx, call, true));

/**
 * The six worker routes (docs/protocol.md, "Taking jobs", "Results", "Streaming", "Stopping one
 * job", "Heartbeat"), none rate-limited (the platform lists none). Any other name under
 * `/v2/<endpoint>/` is no worker route: 404.
 */
export const WORKER_ROUTE_TABLE = tableOf<WorkerRoutesContext, "worker">()({
  "job-take": route({
    method: "GET",
    path: "job-take/:workerId",
    access: "worker",
    rate: "unlimited",
    body: "none",
    handle: takeRoute("job-take"),
  }),
  "job-take-batch": route({
    method: "GET",
    path: "job-take-batch/:workerId",
    access: "worker",
    rate: "unlimited",
    body: "none",
    handle: takeRoute("job-take-batch"),
  }),
  "job-stop": route({
    method: "GET",
    path: "job-stop/:workerId",
    access: "worker",
    rate: "unlimited",
    body: "none",
    handle: async (ctx, call) => {
      const { res } = call;
      const worker = workerOf(ctx, call, false);
      const ids = await ctx.store.workers.stopPoll(worker, ctx.takeTimeoutMs, hangUpSignal(res));
      if (ids.length === 0) {
        answer(res, 204);
        return sendEmpty(res, 204);
      }
      answer(res, 200);
      return sendJson(res, 200, { jobsToStop: ids });
    },
  }),
  ping: route({
    method: "GET",
    path: "ping/:workerId",
    access: "worker",
    rate: "unlimited",
    body: "none",
    handle: (ctx, call) => ping(call.res, call.url, ctx.store.workers, workerOf(ctx, call, false)),
  }),
  "job-done": route({
    method: "POST",
    path: "job-done/:workerId/:jobId",
    access: "worker",
    rate: "unlimited",
    body: resultBody("job-done"),
    handle: resultRoute("job-done"),
  }),
  "job-stream": route({
    method: "POST",
    path: "job-stream/:workerId/:jobId",
    access: "worker",
    rate: "unlimited",
    body: resultBody("job-stream"),
    handle: resultRoute("job-stream"),
  }),
}) satisfies Record<WorkerRoute, unknown>;

/**
 * The worker routes' family: every request is recorded in the request log (a refused one without
 * its body), injected faults are applied to requests with the key, and errors are answered
 * `{error, status}`.
 */
export function workerFamily(ctx: WorkerRoutesContext): RouteFamily<WorkerRoutesContext, "worker"> {
  return {
    name: "worker",
    mount: "/v2/:endpoint/",
    claims: "named",
    context: ctx,
    routes: routesOf(WORKER_ROUTE_TABLE),
    defaultAccess: "worker",
    authorize: (_access, request) =>
      ctx.keys.worker(headerOf(request.headers, "authorization"), request.endpointId),
    hasEndpoint: (id) => ctx.store.table.hasEndpoint(id),
    refuse(call, refusal) {
      const name = call.path[0] as WorkerRoute;
      const { status, message } = refusalOf(call, name, refusal);
      recordOf(ctx, call, name, undefined).status = status;
      const headers = refusal.reason === "method" ? { allow: refusal.allow.join(", ") } : {};
      sendError(call.res, status, message, { headers });
    },
    around: (call, body, next) => aroundWorkerRoute(ctx, call, body, next),
  };
}

function refusalOf(
  call: RouteCall,
  route: WorkerRoute,
  refusal: Refusal,
): { status: number; message: string } {
  const spec = WORKER_ROUTE_TABLE[route];
  const wantsJob = spec.path.endsWith("/:jobId");
  switch (refusal.reason) {
    case "key":
    case "forbidden":
      // A worker is either let in or not: the platform answers 401 to a worker with a bad key.
      return { status: 401, message: "missing or wrong API key: send the raw key in Authorization" };
    case "endpoint":
      return { status: 404, message: `endpoint "${call.endpointId}" not found` };
    case "malformed":
      return { status: 400, message: `malformed path: ${call.url.pathname}` };
    case "method":
      return { status: 405, message: `${route} takes ${spec.method}, got ${call.req.method}` };
    case "path":
      return {
        status: 404,
        message: `${route} path must be /v2/<endpoint>/${route}/<worker id>${wantsJob ? "/<job id>" : ""}`,
      };
    default:
      return { status: refusal.status, message: refusal.message };
  }
}

/** Records a worker-route request in the log; `body` undefined for one refused before its body was read. */
function recordOf(
  ctx: WorkerRoutesContext,
  call: RouteCall,
  route: WorkerRoute,
  body: JsonRead | undefined,
): LogEntry {
  return ctx.requests.add({
    route,
    endpointId: call.endpointId,
    method: call.req.method ?? "GET",
    path: call.url.pathname,
    search: call.url.search,
    headers: call.req.headers,
    body: body?.text ?? "",
    bodyBytes: body?.bytes ?? 0,
  });
}

/**
 * Around every worker route, once its body is read (docs/protocol.md, "Taking jobs" to
 * "Heartbeat"): records the request, applies an injected fault, answers a body that failed to
 * read (400), then hands the parsed body to the route.
 */
async function aroundWorkerRoute(
  ctx: WorkerRoutesContext,
  call: RouteCall,
  body: JsonRead,
  next: (body: ParsedBody) => void | Promise<void>,
): Promise<void> {
  const { req, res } = call;
  const route = call.path[0] as WorkerRoute;
  const record = recordOf(ctx, call, route, body);
  (res as RecordedResponse)[RECORD] = record;
  res.once("close", () => {
    if (record.status === "pending") record.status = "dropped";
  });

  // Faults are the test's, for its own workers: only a request with the key can use one up.
  const fault = ctx.requests.nextFault(route);
  if (fault !== undefined && "drop" in fault) {
    record.status = "dropped";
    req.socket.destroy();
    return;
  }
  if (fault !== undefined && "status" in fault) {
    record.status = fault.status;
    const headers: Record<string, string> = {
      ...(fault.retryAfterSec === undefined ? {} : { "retry-after": String(fault.retryAfterSec) }),
      ...(fault.location === undefined ? {} : { location: fault.location }),
    };
    if (fault.body !== undefined) {
      if (!res.headersSent) res.writeHead(fault.status, { "content-type": "application/json", ...headers });
      res.end(fault.body);
    } else if (fault.status === 204 || fault.status === 304) {
      sendEmpty(res, fault.status, headers);
    } else {
      sendError(res, fault.status, `injected fault: ${fault.status}`, { headers });
    }
    return;
  }
  if (fault !== undefined && "delayMs" in fault) await sleep(fault.delayMs);

  if (!body.ok) {
    record.status = body.status === 413 ? 400 : body.status;
    return sendError(res, 400, body.message);
  }
  await next(body);
}

async function take(
  ctx: WorkerRoutesContext,
  res: ServerResponse,
  url: URL,
  route: "job-take" | "job-take-batch",
  worker: WorkerState,
): Promise<void> {
  let max = 1;
  if (route === "job-take-batch") {
    const raw = url.searchParams.get("batch_size");
    max = Number(raw);
    if (raw === null || !Number.isInteger(max) || max < 1) {
      answer(res, 400);
      return sendError(res, 400, `batch_size must be an integer ≥ 1, got ${raw ?? "nothing"}`);
    }
  }
  // Each job comes already written as JSON: the store marks a job IN_PROGRESS only once its
  // answer exists, and fails one that cannot be written instead of handing it out.
  const hungUp = hangUpSignal(res);
  const handed = await ctx.store.take(worker.endpointId, worker.id, max, ctx.takeTimeoutMs, hungUp);
  if (handed.length === 0) {
    answer(res, 204);
    return sendEmpty(res, 204);
  }
  const jobs = handed.map((h) => h.job);
  if (res.destroyed || hungUp.aborted) {
    ctx.store.undeliver(worker.endpointId, worker.id, jobs);
    answer(res, "dropped");
    return;
  }
  res.once("close", () => {
    if (!res.writableFinished) ctx.store.undeliver(worker.endpointId, worker.id, jobs);
  });
  const text = route === "job-take" ? handed[0]!.json : `[${handed.map((h) => h.json).join(",")}]`;
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(text)),
  });
  res.end(text);
  answer(res, 200);
}

function ping(res: ServerResponse, url: URL, workers: WorkerRegistry, worker: WorkerState): void {
  // One comma-joined value, as runlet and the Python SDK send it; repeated `job_id=` parameters are
  // read too, since nothing in the protocol rules them out.
  const jobIds = url.searchParams
    .getAll("job_id")
    .flatMap((v) => v.split(","))
    .filter((s) => s !== "");
  worker.lastPing = { jobIds, version: url.searchParams.get("runpod_version") ?? undefined };
  workers.pinged(worker, jobIds);
  if (url.searchParams.get("status") === "unhealthy") {
    const check = url.searchParams.get("check") ?? "unknown";
    worker.unhealthy = `${check}: ${url.searchParams.get("reason") ?? ""}`;
  }
  answer(res, 200);
  sendJson(res, 200, {});
}

/**
 * True for a parsed job-stream body the chunk schema would take as it is: `output`, then
 * optionally `metrics` holding only numbers, strings, booleans and nulls (a runlet worker's every
 * post). Such a body is kept without the schema's walk and copy, a few µs a post of a token
 * stream; any other body goes through the schema, which says what is wrong and drops unknown
 * members.
 */
function plainChunk(raw: object): boolean {
  let members = 0;
  for (const name in raw) {
    if (name !== (members === 0 ? "output" : members === 1 ? "metrics" : undefined)) return false;
    members++;
  }
  if (members === 0) return false;
  if (members === 1) return true;
  const metrics = (raw as { metrics: unknown }).metrics;
  if (typeof metrics !== "object" || metrics === null || Array.isArray(metrics)) return false;
  for (const name in metrics) {
    const value = (metrics as Record<string, unknown>)[name];
    const type = typeof value;
    if (value !== null && type !== "number" && type !== "string" && type !== "boolean") return false;
  }
  return true;
}

/** job-done and job-stream: validates the body and applies it. Returns the status answered. */
function result(
  ctx: WorkerRoutesContext,
  url: URL,
  route: "job-done" | "job-stream",
  endpointId: string,
  workerId: string,
  jobId: string,
  raw: unknown,
  bytes: number,
): { status: number; message?: string } {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { status: 400, message: `${route} body must be a JSON object` };
  }
  const job = ctx.store.table.get(jobId);
  if (job === undefined || job.endpointId !== endpointId) {
    return { status: 404, message: `job "${jobId}" not found` };
  }
  // The record names the one worker that may change a running job. A job a heartbeat lapse (or a
  // ping that stopped listing it) took away is waiting for, or running on, another worker: what its
  // old worker sends now is answered 200 as a late post for an ended job is, ignored and logged.
  if (job.isStrayFrom(workerId)) {
    ctx.store.countStray(job);
    ctx.logger?.warn(
      { jobId, workerId, holder: job.workerId ?? null, route },
      "ignored a post from a worker that does not hold this job",
    );
    return { status: 200 };
  }
  if (route === "job-stream") {
    if (plainChunk(raw)) {
      ctx.store.addChunk(job, raw as StreamChunk, bytes);
      return { status: 200 };
    }
    const chunk = streamChunkSchema.safeParse(raw);
    if (!chunk.success) {
      return { status: 400, message: `job-stream body must be {output, metrics?}: ${chunk.error.message}` };
    }
    ctx.store.addChunk(job, chunk.data, bytes);
    return { status: 200 };
  }
  // Any object is a result: the platform reads `status`, `output`, `error` and `stopPod` and ignores the rest.
  const fields = raw as { status?: unknown; output?: unknown; error?: unknown; stopPod?: unknown };
  if (fields.status === "IN_PROGRESS") {
    ctx.store.addProgress(job, fields.output, bytes);
    return { status: 200 };
  }
  const isStream = url.searchParams.get("isStream");
  const stopPod = fields.stopPod === true;
  const applied = ctx.store.complete(job, {
    // Only a string is an error: an object there is taken as a result without output, as the platform does.
    ...(typeof fields.error === "string" ? { error: fields.error } : {}),
    ...(Object.hasOwn(fields, "output") && typeof fields.error !== "string" ? { output: fields.output } : {}),
    stopPod,
    isStream: isStream === "true" ? true : isStream === "false" ? false : undefined,
    bytes,
    batch: readBatchQuery(url.searchParams),
  });
  if (applied && stopPod) ctx.onStopPod(endpointId, workerId);
  return { status: 200 };
}
