import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { KeyRing } from "../http/auth.js";
import type { RateLimiter } from "../http/rate-limits.js";
import type { ReadJsonOptions } from "../http/read-json.js";
import {
  type ParsedBody,
  type RouteCall,
  type RouteFamily,
  routeOf,
  routesOf,
  tableOf,
} from "../http/route-table.js";
import type { JobStore } from "../jobs/job-store.js";
import type { ResolvedOptions } from "../options.js";
import { clientChecks } from "../routes/client-routes.js";
import { type OpenAIErrorBody, openAIError, sendOpenAIError } from "./error-body.js";
import type { JobFeed } from "./job-feed.js";
import { relay } from "./relay.js";

/** What the OpenAI routes need from the harness. */
export interface OpenAIRoutesContext {
  readonly store: JobStore;
  readonly keys: KeyRing;
  readonly limiter: RateLimiter;
  readonly options: ResolvedOptions;
  readonly feed: JobFeed;
}

const route = routeOf<OpenAIRoutesContext, "client">();

/** How an OpenAI body is read: under `/runsync`'s limit, two levels under the job's nesting limit. */
const openAIBody = (ctx: OpenAIRoutesContext): ReadJsonOptions => ({
  limitBytes: ctx.options.limits.runsyncBytes,
  // The body becomes `input.openai_input` of the job: two levels under the job's own limit.
  maxDepth: Math.max(1, ctx.options.limits.maxJsonDepth - 2),
  subject: "request body",
  tooLargeStatus: 413,
  // An empty POST (models) is an empty body, as for GET.
  allowEmpty: true,
});

/**
 * `/v2/<endpoint>/openai/v1/<path>` as the platform serves it: the request becomes an ordinary job
 * whose input is `{openai_route: "/v1/<path>", openai_input: <body, or {} for GET>}`; the answer is
 * the job's output (not streamed), or its stream items as server-sent events (`stream: true`).
 * `models` and `models/<id>` take GET too; every request counts under the `openai` rate-limit row.
 */
export const OPENAI_ROUTE_TABLE = tableOf<OpenAIRoutesContext, "client">()({
  openai: [
    route({
      method: "GET",
      path: "openai/v1/models",
      access: "client",
      rate: "openai",
      body: openAIBody,
      handle: (ctx, call, body) => handleOpenAIRoute(ctx, call, "/v1/models", body),
    }),
    route({
      method: "GET",
      path: "openai/v1/models/*model",
      access: "client",
      rate: "openai",
      body: openAIBody,
      handle: (ctx, call, body) => handleOpenAIRoute(ctx, call, `/v1/models/${call.params.model}`, body),
    }),
    route({
      method: "POST",
      path: "openai/v1/*route",
      access: "client",
      rate: "openai",
      body: openAIBody,
      handle: (ctx, call, body) => handleOpenAIRoute(ctx, call, `/v1/${call.params.route}`, body),
    }),
  ],
});

/**
 * The OpenAI routes' family: refusals in OpenAI's error shape. The router checks key (401),
 * endpoint (404), the key's access (403), the path (404), the method (405) and the `openai` rate
 * limit (429) before a byte of the body is read.
 */
export function openAIFamily(ctx: OpenAIRoutesContext): RouteFamily<OpenAIRoutesContext, "client"> {
  return {
    name: "openai",
    mount: "/v2/:endpoint/",
    claims: "named",
    context: ctx,
    routes: routesOf(OPENAI_ROUTE_TABLE),
    ...clientChecks(ctx),
    refuse({ req, res, url, endpointId, path }, refusal) {
      // Refused before a job exists: the answer still carries a request id, as OpenAI's do.
      const refused = (status: number, body: OpenAIErrorBody, headers?: Record<string, string>) =>
        sendRefusal(res, status, body, headers);
      switch (refusal.reason) {
        case "key":
          return refused(
            401,
            openAIError("missing or wrong API key", "invalid_request_error", "invalid_api_key"),
          );
        case "endpoint":
          return refused(
            404,
            openAIError(`endpoint "${endpointId}" not found`, "not_found_error", "endpoint_not_found"),
          );
        case "forbidden":
          return refused(
            403,
            openAIError(`this API key has no access to endpoint "${endpointId}"`, "permission_error"),
          );
        case "path":
        case "malformed":
          return refused(
            404,
            openAIError(
              `Invalid URL (${req.method} ${url.pathname})`,
              "invalid_request_error",
              "unknown_url",
            ),
          );
        case "method": {
          const methods = [...refusal.allow].sort();
          return refused(
            405,
            openAIError(
              `/${path.slice(1).join("/")} takes ${methods.join(" or ")}, got ${req.method}`,
              "invalid_request_error",
              "method_not_allowed",
            ),
            { allow: methods.join(", ") },
          );
        }
        case "rate":
          return refused(429, openAIError(refusal.message, "rate_limit_error", "rate_limit_exceeded"), {
            ...refusal.headers,
          });
        default:
          return refused(
            refusal.status,
            refusal.status === 413
              ? openAIError(refusal.message, "invalid_request_error", "too_large")
              : openAIError(refusal.message, "invalid_request_error"),
          );
      }
    },
  };
}

/** Serves an OpenAI request the router has checked and whose body it has read. */
async function handleOpenAIRoute(
  ctx: OpenAIRoutesContext,
  call: RouteCall,
  openaiRoute: string,
  read: ParsedBody,
): Promise<void> {
  const { res } = call;
  const value = read.value;
  if (value !== undefined && (typeof value !== "object" || value === null || Array.isArray(value))) {
    sendRefusal(res, 400, openAIError("request body must be a JSON object", "invalid_request_error"));
    return;
  }
  const body = (value ?? {}) as Record<string, unknown>;
  const job = ctx.store.create(
    call.endpointId,
    "runsync",
    { input: { openai_route: openaiRoute, openai_input: body }, bytes: read.bytes },
    ctx.options.limits.runsyncRetentionMs,
  );
  await relay(ctx, res, job, body["stream"] === true);
}

/**
 * Answers a request refused before its job was made (a wrong key, a bad body, a wrong method):
 * with an `x-request-id` of its own (`req_` and 24 hex digits, as OpenAI's look), since there is
 * no job id to give.
 */
function sendRefusal(
  res: ServerResponse,
  status: number,
  body: OpenAIErrorBody,
  headers: Record<string, string> = {},
): void {
  sendOpenAIError(res, status, body, {
    ...headers,
    "x-request-id": `req_${randomBytes(12).toString("hex")}`,
  });
}
