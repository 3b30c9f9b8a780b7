import type { IncomingMessage, ServerResponse } from "node:http";
import type { KeyRing } from "../auth.js";
import { parseJson, readBody } from "../http-util.js";
import type { JobStore } from "../job-store.js";
import type { ResolvedOptions } from "../options.js";
import type { RateLimiter } from "../rate-limits.js";
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
 * Serves `/v2/<endpoint>/openai/v1/<path>` as the platform does: the request becomes an ordinary
 * job whose input is `{openai_route: "/v1/<path>", openai_input: <body, or {} for GET>}`; the answer
 * is the job's output (not streamed), or its stream items as server-sent events (`stream: true`).
 * Auth, endpoint and rate limits (`openai` row) are checked first; every error is OpenAI-shaped.
 * `rest` is the path after `/openai`.
 */
export async function handleOpenAIRoute(
  ctx: OpenAIRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  endpointId: string,
  rest: readonly string[],
): Promise<void> {
  const auth = ctx.keys.client(req.headers.authorization, endpointId);
  if (auth === "unauthorized") {
    return sendOpenAIError(
      res,
      401,
      openAIError("missing or wrong API key", "invalid_request_error", "invalid_api_key"),
    );
  }
  if (!ctx.store.table.hasEndpoint(endpointId)) {
    return sendOpenAIError(
      res,
      404,
      openAIError(`endpoint "${endpointId}" not found`, "not_found_error", "endpoint_not_found"),
    );
  }
  if (auth === "forbidden") {
    return sendOpenAIError(
      res,
      403,
      openAIError(`this API key has no access to endpoint "${endpointId}"`, "permission_error"),
    );
  }
  if (rest[0] !== "v1" || rest.length < 2 || rest.some((part) => part === "")) {
    return sendOpenAIError(
      res,
      404,
      openAIError(`Invalid URL (${req.method} ${url.pathname})`, "invalid_request_error", "unknown_url"),
    );
  }
  const openaiRoute = `/${rest.join("/")}`;
  const method = openaiRoute === "/v1/models" ? ["GET", "POST"] : ["POST"];
  if (!method.includes(req.method ?? "")) {
    return sendOpenAIError(
      res,
      405,
      openAIError(
        `${openaiRoute} takes ${method.join(" or ")}, got ${req.method}`,
        "invalid_request_error",
        "method_not_allowed",
      ),
      { allow: method.join(", ") },
    );
  }
  const counts = ctx.store.workers.counts(endpointId, 0);
  const slot = ctx.limiter.acquire(endpointId, "openai", counts.idle + counts.running);
  if (!slot.ok) {
    return sendOpenAIError(res, 429, openAIError(slot.message, "rate_limit_error", "rate_limit_exceeded"), {
      "retry-after": String(slot.retryAfterSec),
    });
  }
  res.once("close", slot.release);
  let body: Record<string, unknown> = {};
  if (req.method === "POST") {
    const read = await readRequestBody(ctx, req, res);
    if (read === undefined) return;
    body = read;
  }
  const job = ctx.store.create(
    endpointId,
    "runsync",
    { input: { openai_route: openaiRoute, openai_input: body } },
    ctx.options.limits.runsyncRetentionMs,
  );
  await relay(ctx, res, job, body["stream"] === true);
}

/** Reads a JSON object body, or answers the error and returns undefined. */
async function readRequestBody(
  ctx: OpenAIRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Record<string, unknown> | undefined> {
  const limit = ctx.options.limits.runsyncBytes;
  const read = await readBody(req, limit);
  if (!read.ok && read.tooLarge) {
    sendOpenAIError(
      res,
      413,
      openAIError(`request body is over the limit of ${limit} bytes`, "invalid_request_error", "too_large"),
    );
    return undefined;
  }
  if (!read.ok) {
    sendOpenAIError(res, 400, openAIError("request body is not valid UTF-8", "invalid_request_error"));
    return undefined;
  }
  // An empty POST (models) is an empty body, as for GET.
  if (read.text.trim() === "") return {};
  const parsed = parseJson(read.text);
  if (!parsed.ok) {
    sendOpenAIError(
      res,
      400,
      openAIError(`request body is not valid JSON: ${parsed.message}`, "invalid_request_error"),
    );
    return undefined;
  }
  const value = parsed.value;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    sendOpenAIError(res, 400, openAIError("request body must be a JSON object", "invalid_request_error"));
    return undefined;
  }
  return value as Record<string, unknown>;
}
