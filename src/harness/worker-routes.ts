import type { IncomingMessage, ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { streamChunkSchema } from "../protocol/worker-bodies.js";
import type { KeyRing } from "./auth.js";
import {
  hangUpSignal,
  headersOf,
  parseJson,
  queryOf,
  readBody,
  sendEmpty,
  sendError,
  sendJson,
} from "./http-util.js";
import { deliveredOf } from "./job-entry.js";
import type { JobStore } from "./job-store.js";
import type { RequestLog, WorkerRoute } from "./request-log.js";
import { parseStreamBody } from "./stream-body.js";
import type { WorkerRegistry, WorkerState } from "./worker-registry.js";

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
  /** A worker posted `stopPod: true` (the scaler replaces workers it started). */
  readonly onStopPod: (endpointId: string, workerId: string) => void;
  /** Where ignored posts from a worker that does not hold the job are reported (warn). */
  readonly logger: Logger | undefined;
}

const GET_ROUTES: ReadonlySet<WorkerRoute> = new Set(["job-take", "job-take-batch", "job-stop", "ping"]);
/** Body limit for routes that carry none (a GET with a body is odd but harmless when small). */
const SMALL_BODY_BYTES = 65_536;
const JSON_TYPES = new Set(["application/json", "application/x-www-form-urlencoded"]);

/** Serves one request to `/v2/<endpointId>/<route>/<workerId>[/<jobId>]` (docs/protocol.md, "Taking jobs" to "Heartbeat"). */
export async function handleWorkerRoute(
  ctx: WorkerRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: WorkerRoute,
  endpointId: string,
  rest: readonly string[],
): Promise<void> {
  const limit =
    route === "job-done" ? ctx.jobDoneBytes : route === "job-stream" ? ctx.streamBodyBytes : SMALL_BODY_BYTES;
  const body = await readBody(req, limit);
  const record = ctx.requests.add({
    route,
    endpointId,
    method: req.method ?? "GET",
    path: url.pathname,
    query: queryOf(url),
    headers: headersOf(req),
    body: body.ok ? body.text : body.tooLarge ? "" : body.bytes.toString("utf8"),
    status: "pending",
  });
  const answer = (status: number | "dropped") => {
    record.status = status;
  };
  res.once("close", () => {
    if (record.status === "pending") record.status = "dropped";
  });

  const fault = ctx.requests.nextFault(route);
  if (fault !== undefined && "drop" in fault) {
    record.status = "dropped";
    req.socket.destroy();
    return;
  }
  if (fault !== undefined && "status" in fault) {
    answer(fault.status);
    const headers: Record<string, string> =
      fault.retryAfterSec === undefined ? {} : { "retry-after": String(fault.retryAfterSec) };
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

  const fail = (status: number, message: string) => {
    answer(status);
    sendError(res, status, message);
  };
  if (ctx.keys.worker(req.headers.authorization, endpointId) !== "ok") {
    return fail(401, "missing or wrong API key: send the raw key in Authorization");
  }
  if (!ctx.store.table.hasEndpoint(endpointId)) return fail(404, `endpoint "${endpointId}" not found`);
  const expected = GET_ROUTES.has(route) ? "GET" : "POST";
  if (req.method !== expected) return fail(405, `${route} takes ${expected}, got ${req.method}`);
  const workerId = rest[0];
  const jobId = rest[1];
  const wantsJob = route === "job-done" || route === "job-stream";
  if (workerId === undefined || workerId === "" || rest.length !== (wantsJob ? 2 : 1) || jobId === "") {
    return fail(
      404,
      `${route} path must be /v2/<endpoint>/${route}/<worker id>${wantsJob ? "/<job id>" : ""}`,
    );
  }
  if (!body.ok && body.tooLarge) {
    return fail(400, `${route} body is over the limit of ${body.limitBytes} bytes`);
  }
  if (!body.ok) return fail(400, `${route} body is not valid UTF-8`);

  const worker = ctx.store.workers.seen(endpointId, workerId);
  switch (route) {
    case "job-take":
    case "job-take-batch":
      return await take(ctx, res, url, route, worker, answer);
    case "job-stop": {
      const ids = await ctx.store.workers.stopPoll(worker, ctx.takeTimeoutMs, hangUpSignal(res));
      if (ids.length === 0) {
        answer(204);
        return sendEmpty(res, 204);
      }
      answer(200);
      return sendJson(res, 200, { jobsToStop: ids });
    }
    case "ping":
      return ping(res, url, ctx.store.workers, worker, answer);
    default: {
      const outcome = result(ctx, req, url, route, endpointId, workerId, jobId!, body.text);
      answer(outcome.status);
      if (outcome.message !== undefined) return sendError(res, outcome.status, outcome.message);
      return sendJson(res, 200, {});
    }
  }
}

async function take(
  ctx: WorkerRoutesContext,
  res: ServerResponse,
  url: URL,
  route: WorkerRoute,
  worker: WorkerState,
  answer: (status: number | "dropped") => void,
): Promise<void> {
  let max = 1;
  if (route === "job-take-batch") {
    const raw = url.searchParams.get("batch_size");
    max = Number(raw);
    if (raw === null || !Number.isInteger(max) || max < 1) {
      answer(400);
      return sendError(res, 400, `batch_size must be an integer ≥ 1, got ${raw ?? "nothing"}`);
    }
  }
  const jobs = await ctx.store.take(worker.endpointId, worker.id, max, ctx.takeTimeoutMs, hangUpSignal(res));
  if (jobs.length === 0) {
    answer(204);
    return sendEmpty(res, 204);
  }
  if (res.destroyed) {
    ctx.store.undeliver(worker.endpointId, worker.id, jobs);
    answer("dropped");
    return;
  }
  answer(200);
  res.once("close", () => {
    if (!res.writableFinished) ctx.store.undeliver(worker.endpointId, worker.id, jobs);
  });
  const delivered = jobs.map(deliveredOf);
  sendJson(res, 200, route === "job-take" ? delivered[0] : delivered);
}

function ping(
  res: ServerResponse,
  url: URL,
  workers: WorkerRegistry,
  worker: WorkerState,
  answer: (status: number | "dropped") => void,
): void {
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
  answer(200);
  sendJson(res, 200, {});
}

/** job-done and job-stream: validates the body and applies it. Returns the status answered. */
function result(
  ctx: WorkerRoutesContext,
  req: IncomingMessage,
  url: URL,
  route: WorkerRoute,
  endpointId: string,
  workerId: string,
  jobId: string,
  text: string,
): { status: number; message?: string } {
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (!JSON_TYPES.has(type)) {
    return {
      status: 400,
      message: `${route} takes a JSON body as application/json or application/x-www-form-urlencoded, got "${type}"`,
    };
  }
  const parsed = route === "job-stream" ? parseStreamBody(text) : parseJson(text);
  if (!parsed.ok) return { status: 400, message: `${route} body is not JSON: ${parsed.message}` };
  const raw = parsed.value;
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
  if (
    !job.deleted &&
    (job.status === "IN_QUEUE" || (job.status === "IN_PROGRESS" && job.workerId !== workerId))
  ) {
    job.strayPosts++;
    ctx.logger?.warn(
      { jobId, workerId, holder: job.workerId ?? null, route },
      "ignored a post from a worker that does not hold this job",
    );
    return { status: 200 };
  }
  if (route === "job-stream") {
    const chunk = streamChunkSchema.safeParse(raw);
    if (!chunk.success) {
      return { status: 400, message: `job-stream body must be {output, metrics?}: ${chunk.error.message}` };
    }
    ctx.store.addChunk(job, chunk.data);
    return { status: 200 };
  }
  // Any object is a result: the platform reads `status`, `output`, `error` and `stopPod` and ignores the rest.
  const fields = raw as { status?: unknown; output?: unknown; error?: unknown; stopPod?: unknown };
  if (fields.status === "IN_PROGRESS") {
    ctx.store.addProgress(job, fields.output);
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
  });
  if (applied && stopPod) ctx.onStopPod(endpointId, workerId);
  return { status: 200 };
}
