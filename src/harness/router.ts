import type { IncomingMessage, ServerResponse } from "node:http";
import { type ClientRoutesContext, handleClientRoute, isClientRoute } from "./client-routes.js";
import { sendError } from "./http-util.js";
import { handleOpenAIRoute, OPENAI_ROUTE, type OpenAIRoutesContext } from "./openai/index.js";
import type { ExtraRoutes } from "./options.js";
import { isWorkerRoute } from "./request-log.js";
import { handleWorkerRoute, type WorkerRoutesContext } from "./worker-routes.js";

/** What the router sends requests to. */
export interface RouterTargets {
  readonly worker: WorkerRoutesContext;
  readonly client: ClientRoutesContext;
  /** `/v2/<endpoint>/openai/*` (docs/openai.md). */
  readonly openai: OpenAIRoutesContext;
  /** Tried in order for every path that is not a job or worker route; unanswered paths get 404. */
  readonly fallbacks: readonly ExtraRoutes[];
}

/**
 * Routes one request: `/v2/<endpoint>/<worker route>/...` to the worker routes,
 * `/v2/<endpoint>/<job route>[/<id>]` to the client routes, `/v2/<endpoint>/openai/...` to the
 * OpenAI routes, anything else to the fallbacks
 * (the `extraRoutes` seam, then the management copy), else a 404 in the job API's error body.
 */
export async function routeRequest(
  targets: RouterTargets,
  req: IncomingMessage,
  res: ServerResponse,
  baseUrl: string,
): Promise<void> {
  const url = new URL(req.url ?? "/", baseUrl);
  let parts: string[];
  try {
    parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
  } catch {
    return sendError(res, 400, `malformed path: ${url.pathname}`);
  }
  const [prefix, endpointId, route, ...rest] = parts;
  if (prefix === "v2" && endpointId !== undefined && endpointId !== "") {
    if (isWorkerRoute(route)) {
      return handleWorkerRoute(targets.worker, req, res, url, route, endpointId, rest);
    }
    if (isClientRoute(route)) {
      return handleClientRoute(targets.client, req, res, url, route, endpointId, rest);
    }
    if (route === OPENAI_ROUTE) return handleOpenAIRoute(targets.openai, req, res, url, endpointId, rest);
  }
  for (const fallback of targets.fallbacks) {
    if (await fallback(req, res, url)) return;
  }
  sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
}
