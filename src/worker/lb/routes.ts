import type { HandlerDefinition } from "../../handler/define-handler.js";
import { OPENAI_SCHEMA_MARK } from "../../protocol/openai.js";

/**
 * The load-balancing server's routes (docs/load-balancing.md, "Requests"): which paths it serves
 * for a handler, and how each request becomes the job's input.
 */

/** How a route's request becomes a job, and how its answer is written. */
export type RouteKind =
  /** `/run`, `/runsync`: the body is `{input, policy?}`; the answer is /runsync's shape. */
  | "job"
  /** `/stream`: as `job`, always answered with server-sent events. */
  | "stream"
  /** A custom path (`paths`): the body is the input itself. */
  | "custom"
  /** An OpenAI route of a `defineOpenAIHandler` handler: OpenAI's bodies and errors. */
  | "openai";

/** One route. */
export interface Route {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly kind: RouteKind;
}

/** True for a handler made with `defineOpenAIHandler` (its input schema carries the mark). */
export function isOpenAIHandler(definition: HandlerDefinition): boolean {
  const meta = (definition.input as { meta?: () => Record<string, unknown> | undefined }).meta?.();
  return Array.isArray(meta?.[OPENAI_SCHEMA_MARK]);
}

/** The routes a handler is served on, by path. */
export function routesOf(definition: HandlerDefinition): ReadonlyMap<string, Route> {
  const routes = new Map<string, Route>();
  const add = (method: Route["method"], path: string, kind: RouteKind) =>
    routes.set(path, { method, path, kind });
  add("POST", "/run", "job");
  add("POST", "/runsync", "job");
  add("POST", "/stream", "stream");
  if (isOpenAIHandler(definition)) {
    add("GET", "/v1/models", "openai");
    add("POST", "/v1/chat/completions", "openai");
    add("POST", "/v1/completions", "openai");
    add("POST", "/v1/responses", "openai");
    add("GET", MODEL_ROUTE, "openai");
  }
  for (const path of definition.paths) add("POST", path, "custom");
  return routes;
}

/** `GET /v1/models/{id}`: one model, the id being the rest of the path. */
const MODEL_ROUTE = "/v1/models/{id}";

/** The route serving `path`: its own, else `/v1/models/{id}` for a path under `/v1/models/`. */
export function routeFor(routes: ReadonlyMap<string, Route>, path: string): Route | undefined {
  const own = routes.get(path);
  if (own !== undefined) return own;
  return path.startsWith("/v1/models/") && path.length > "/v1/models/".length
    ? routes.get(MODEL_ROUTE)
    : undefined;
}

/** The path of a request URL, without its query. */
export function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}
