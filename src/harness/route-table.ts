import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuthResult } from "./auth.js";
import { dropBody, type JsonRead, type ReadJsonOptions, readJson } from "./read-json.js";

/** One request on its way through a route. */
export interface RouteCall {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly url: URL;
  /** The endpoint the path names ("" for routes outside `/v2/<endpoint>/`). */
  readonly endpointId: string;
  /** The path segments after the route's own. */
  readonly params: readonly string[];
}

/** Why the router answered instead of the route: the checks every route goes through, in order. */
export type Refusal =
  | { readonly reason: "key" | "forbidden" | "endpoint" | "path" | "method" }
  | {
      readonly reason: "rate" | "body";
      readonly status: number;
      readonly message: string;
      readonly headers?: Readonly<Record<string, string>>;
    };

/**
 * A route. The key and the body limit are fields, not lines in a handler (docs/architecture.md):
 * {@link serveRoute} checks the key, the endpoint, the path and the method, and admits the request,
 * before a byte of the body is read, and then reads it with {@link readJson} under the route's
 * limit and nesting depth. A route cannot leave either out.
 */
export interface Route {
  /** The route's name (its path segment), for messages and logs. */
  readonly name: string;
  /** Whose request this is; `"ok"` lets it on. */
  readonly auth: (call: RouteCall) => AuthResult;
  /** The methods the path takes, or undefined when the params name nothing here (404). */
  readonly methods: (params: readonly string[]) => readonly string[] | undefined;
  /** Whether the params fit the route, checked after the method (404 when not). @default any */
  readonly params?: (params: readonly string[]) => boolean;
  /** Last check before the body (a rate limit): a refusal answers the request. */
  readonly admit?: (call: RouteCall) => Refusal | undefined;
  /** How its body is read: the byte limit, the nesting depth, the media types. */
  readonly body: (call: RouteCall) => ReadJsonOptions;
  /** The route answers a body that failed to read itself (worker routes record it first). @default false */
  readonly answersBodyErrors?: boolean;
  /** Serves the request once every check has passed and the body is read. */
  readonly handle: (call: RouteCall, body: JsonRead) => Promise<void> | void;
}

/** What a family of routes (client, worker, OpenAI, dashboard) shares. */
export interface RouteFamily {
  /** Whether the path's endpoint exists (checked after the key). */
  readonly hasEndpoint: (endpointId: string) => boolean;
  /** Answers a refusal in the family's error shape. */
  readonly refuse: (call: RouteCall, route: Route, refusal: Refusal) => void;
}

/**
 * Serves one request through `route`: key (401), endpoint (404), the key's access to it (403), the
 * path (404), the method (405), the path's params (404), admission (a rate limit, 429), then the
 * body, read under the route's limits — and only then the route's handler. A refused request's
 * body is never read: it is dropped as it arrives.
 */
export async function serveRoute(family: RouteFamily, route: Route, call: RouteCall): Promise<void> {
  const refusal = check(family, route, call);
  if (refusal !== undefined) {
    dropBody(call.req);
    return family.refuse(call, route, refusal);
  }
  const body = await readJson(call.req, route.body(call));
  if (!body.ok && route.answersBodyErrors !== true) {
    return family.refuse(call, route, { reason: "body", status: body.status, message: body.message });
  }
  await route.handle(call, body);
}

function check(family: RouteFamily, route: Route, call: RouteCall): Refusal | undefined {
  const auth = route.auth(call);
  if (auth === "unauthorized") return { reason: "key" };
  if (!family.hasEndpoint(call.endpointId)) return { reason: "endpoint" };
  if (auth === "forbidden") return { reason: "forbidden" };
  const methods = route.methods(call.params);
  if (methods === undefined) return { reason: "path" };
  if (!methods.includes(call.req.method ?? "")) return { reason: "method" };
  if (route.params !== undefined && !route.params(call.params)) return { reason: "path" };
  return route.admit?.(call);
}

/** The body options of a route that takes none: up to 64 KiB read as text and dropped. */
export function noBody(subject: string): ReadJsonOptions {
  return { limitBytes: 65_536, maxDepth: 0, subject, kind: "text", tooLargeStatus: 400 };
}
