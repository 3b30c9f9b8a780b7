import type { IncomingMessage, ServerResponse } from "node:http";
import { type ClientRoutesContext, clientFamily, clientRoutes } from "./client-routes.js";
import { sendError } from "./http-util.js";
import { OPENAI_ROUTE, type OpenAIRoutesContext, openAIFamily, openAIRoute } from "./openai/index.js";
import type { ExtraRoutes } from "./options.js";
import { type Route, type RouteFamily, serveRoute } from "./route-table.js";
import { type WorkerRoutesContext, workerFamily, workerRoutes } from "./worker-routes.js";

/** What the router sends requests to. */
export interface RouterTargets {
  readonly worker: WorkerRoutesContext;
  readonly client: ClientRoutesContext;
  /** `/v2/<endpoint>/openai/*` (docs/openai.md). */
  readonly openai: OpenAIRoutesContext;
  /** Tried in order for every path that is not a job or worker route; unanswered paths get 404. */
  readonly fallbacks: readonly ExtraRoutes[];
}

/** The harness's route table: under `/v2/<endpoint>/`, each route segment's route and its family. */
export type RouteTable = ReadonlyMap<string, { readonly family: RouteFamily; readonly route: Route }>;

/** Builds the table of every route under `/v2/<endpoint>/`: worker, client and OpenAI routes. */
export function routeTable(targets: RouterTargets): RouteTable {
  const table = new Map<string, { family: RouteFamily; route: Route }>();
  const add = (family: RouteFamily, routes: Iterable<Route>) => {
    for (const route of routes) {
      if (table.has(route.name)) throw new Error(`two routes named "${route.name}"`);
      table.set(route.name, { family, route });
    }
  };
  add(workerFamily(targets.worker), workerRoutes(targets.worker).values());
  add(clientFamily(targets.client), clientRoutes(targets.client).values());
  add(openAIFamily(targets.openai), [openAIRoute(targets.openai)]);
  if (!table.has(OPENAI_ROUTE)) throw new Error("the OpenAI route is missing");
  return table;
}

/**
 * Routes one request: `/v2/<endpoint>/<route>/...` to its entry in the table (which checks the key
 * and the body limit before a byte of the body is read), anything else to the fallbacks (the
 * `extraRoutes` seam, then the management copy), else a 404 in the job API's error body.
 */
export async function routeRequest(
  table: RouteTable,
  fallbacks: readonly ExtraRoutes[],
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
  const [prefix, endpointId, name, ...params] = parts;
  const entry = name === undefined ? undefined : table.get(name);
  if (prefix === "v2" && endpointId !== undefined && endpointId !== "" && entry !== undefined) {
    return serveRoute(entry.family, entry.route, { req, res, url, endpointId, params });
  }
  for (const fallback of fallbacks) {
    if (await fallback(req, res, url)) return;
  }
  sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
}
