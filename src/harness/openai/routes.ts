import type { KeyRing } from "../auth.js";
import type { JobStore } from "../job-store.js";
import type { ResolvedOptions } from "../options.js";
import type { RateLimiter } from "../rate-limits.js";
import type { JsonRead } from "../read-json.js";
import type { Route, RouteCall, RouteFamily } from "../route-table.js";
import { openAIError, sendOpenAIError } from "./error-body.js";
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

/** The path segment after the endpoint id that leads here: `/v2/<endpoint>/openai/...`. */
export const OPENAI_ROUTE = "openai";

/**
 * The OpenAI routes' family: refusals in OpenAI's error shape. The router checks key (401),
 * endpoint (404), the key's access (403), the path (404), the method (405) and the `openai` rate
 * limit (429) before a byte of the body is read.
 */
export function openAIFamily(ctx: OpenAIRoutesContext): RouteFamily {
  return {
    hasEndpoint: (id) => ctx.store.table.hasEndpoint(id),
    refuse({ req, res, url, endpointId, params }, _route, refusal) {
      switch (refusal.reason) {
        case "key":
          return sendOpenAIError(
            res,
            401,
            openAIError("missing or wrong API key", "invalid_request_error", "invalid_api_key"),
          );
        case "endpoint":
          return sendOpenAIError(
            res,
            404,
            openAIError(`endpoint "${endpointId}" not found`, "not_found_error", "endpoint_not_found"),
          );
        case "forbidden":
          return sendOpenAIError(
            res,
            403,
            openAIError(`this API key has no access to endpoint "${endpointId}"`, "permission_error"),
          );
        case "path":
          return sendOpenAIError(
            res,
            404,
            openAIError(
              `Invalid URL (${req.method} ${url.pathname})`,
              "invalid_request_error",
              "unknown_url",
            ),
          );
        case "method": {
          const method = methodsOf(params) ?? [];
          return sendOpenAIError(
            res,
            405,
            openAIError(
              `/${params.join("/")} takes ${method.join(" or ")}, got ${req.method}`,
              "invalid_request_error",
              "method_not_allowed",
            ),
            { allow: method.join(", ") },
          );
        }
        case "rate":
          return sendOpenAIError(
            res,
            429,
            openAIError(refusal.message, "rate_limit_error", "rate_limit_exceeded"),
            { ...refusal.headers },
          );
        default:
          return sendOpenAIError(
            res,
            refusal.status,
            refusal.status === 413
              ? openAIError(refusal.message, "invalid_request_error", "too_large")
              : openAIError(refusal.message, "invalid_request_error"),
          );
      }
    },
  };
}

/** The methods `/v1/<path>` takes, or undefined when the path is not one (`rest` is after `/openai`). */
function methodsOf(rest: readonly string[]): readonly string[] | undefined {
  if (rest[0] !== "v1" || rest.length < 2 || rest.some((part) => part === "")) return undefined;
  return rest.join("/") === "v1/models" ? ["GET", "POST"] : ["POST"];
}

/**
 * `/v2/<endpoint>/openai/v1/<path>` as the platform serves it: the request becomes an ordinary job
 * whose input is `{openai_route: "/v1/<path>", openai_input: <body, or {} for GET>}`; the answer is
 * the job's output (not streamed), or its stream items as server-sent events (`stream: true`).
 */
export function openAIRoute(ctx: OpenAIRoutesContext): Route {
  return {
    name: OPENAI_ROUTE,
    auth: (call) => ctx.keys.client(call.req.headers.authorization, call.endpointId),
    methods: methodsOf,
    admit(call) {
      const counts = ctx.store.workers.counts(call.endpointId, 0);
      const slot = ctx.limiter.acquire(call.endpointId, "openai", counts.idle + counts.running);
      if (!slot.ok) {
        return {
          reason: "rate",
          status: 429,
          message: slot.message,
          headers: { "retry-after": String(slot.retryAfterSec) },
        };
      }
      call.res.once("close", slot.release);
      return undefined;
    },
    body: () => ({
      limitBytes: ctx.options.limits.runsyncBytes,
      // The body becomes `input.openai_input` of the job: two levels under the job's own limit.
      maxDepth: Math.max(1, ctx.options.limits.maxJsonDepth - 2),
      subject: "request body",
      tooLargeStatus: 413,
      // An empty POST (models) is an empty body, as for GET.
      allowEmpty: true,
    }),
    handle: (call, body) => handleOpenAIRoute(ctx, call, body),
  };
}

/** Serves an OpenAI request the router has checked and whose body it has read. */
async function handleOpenAIRoute(ctx: OpenAIRoutesContext, call: RouteCall, read: JsonRead): Promise<void> {
  const { res, params } = call;
  const openaiRoute = `/${params.join("/")}`;
  const value = read.ok ? read.value : undefined;
  if (value !== undefined && (typeof value !== "object" || value === null || Array.isArray(value))) {
    sendOpenAIError(res, 400, openAIError("request body must be a JSON object", "invalid_request_error"));
    return;
  }
  const body = (value ?? {}) as Record<string, unknown>;
  const job = ctx.store.create(
    call.endpointId,
    "runsync",
    { input: { openai_route: openaiRoute, openai_input: body }, bytes: read.ok ? read.bytes : 0 },
    ctx.options.limits.runsyncRetentionMs,
  );
  await relay(ctx, res, job, body["stream"] === true);
}
