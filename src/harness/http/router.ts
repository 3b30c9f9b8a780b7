import type { IncomingMessage, ServerResponse } from "node:http";
import { absoluteTarget } from "./host-check.js";
import { sendError } from "./http-util.js";
import { dropBody, type JsonRead, readJson } from "./read-json.js";
import {
  compiled,
  decide,
  noBody,
  type RouteCall,
  type RouteFamily,
  type RouteRequest,
} from "./route-table.js";

/** One step of a router: a family of declared routes, or a seam such as `extraRoutes`, tried in order. */
export type RouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
) => Promise<boolean> | boolean;

/**
 * The one router of every harness listener: tries each family (and seam) in order; the first that
 * claims the path answers it, else `notFound`. The harness's API listener runs the worker, client
 * and OpenAI families, the `extraRoutes` seam, then the management families; the dashboard's
 * listener its own three.
 */
export class Router {
  readonly #steps: readonly RouteHandler[];
  readonly #notFound: (req: IncomingMessage, res: ServerResponse, url: URL) => void;

  constructor(
    steps: readonly RouteHandler[],
    notFound: (req: IncomingMessage, res: ServerResponse, url: URL) => void,
  ) {
    this.#steps = steps;
    this.#notFound = notFound;
  }

  /**
   * Routes one request; `baseUrl` resolves its path. A target that is not a path or an absolute
   * http(s) URL is answered 400 here (the listeners' HostCheck refuses it first).
   */
  async serve(req: IncomingMessage, res: ServerResponse, baseUrl: string): Promise<void> {
    const url = targetUrl(req.url ?? "/", baseUrl);
    if (url === undefined) {
      dropBody(req);
      sendError(res, 400, `malformed request target ${JSON.stringify((req.url ?? "").slice(0, 200))}`);
      return;
    }
    for (const step of this.#steps) {
      if (await step(req, res, url)) return;
    }
    this.#notFound(req, res, url);
  }
}

/**
 * The URL of a request target. A path is read as a path under `baseUrl`'s origin, even one that
 * starts with `//` (which `new URL(target, base)` would read as a host name); an absolute target
 * is parsed as it is. Undefined for anything else, or what does not parse.
 */
function targetUrl(target: string, baseUrl: string): URL | undefined {
  if (!target.startsWith("/")) return absoluteTarget(target);
  try {
    return new URL(`${originOf(baseUrl)}${target}`);
  } catch {
    return undefined;
  }
}

/** The last base URL's origin: a listener's base URL is the same for every request, so it is parsed once. */
let lastOrigin: { readonly baseUrl: string; readonly origin: string } | undefined;

/** `new URL(baseUrl).origin`, remembered for the last `baseUrl` (throws as `new URL` does). */
function originOf(baseUrl: string): string {
  if (lastOrigin?.baseUrl !== baseUrl) lastOrigin = { baseUrl, origin: new URL(baseUrl).origin };
  return lastOrigin.origin;
}

/** Decodes path segments; undefined when one is badly escaped (`%zz`). Segments without `%` are taken as they are. */
function decodeAll(raw: readonly string[]): string[] | undefined {
  let escaped = false;
  for (const segment of raw) if (segment.includes("%")) escaped = true;
  if (!escaped) return raw as string[];
  try {
    return raw.map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

/** One segment decoded; undefined when it is badly escaped. */
function decodeOne(raw: string): string | undefined {
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** The request as the route checks see it, when `url` lies under the family's mount and the family claims it. */
export function requestOf<C, A extends string>(
  family: RouteFamily<C, A>,
  method: string,
  headers: RouteRequest["headers"],
  url: URL,
): { request: RouteRequest; malformed: boolean } | undefined {
  const mount = compiled(family);
  // "/a/b" splits to ["", "a", "b"]: segment i of the path is raw[i + 1]; "/" is the one empty segment.
  const raw = url.pathname.split("/");
  const count = mount.mount.length;
  for (let i = 0; i < count; i++) {
    const given = raw[i + 1];
    if (given === undefined) return undefined;
    if (i === mount.endpointAt ? given === "" : given !== mount.mount[i]) return undefined;
  }
  const rest = raw.slice(count + 1);
  if (rest.length === 0 && family.claims === "named") return undefined;
  const decoded = decodeAll(rest);
  const name = decoded?.[0] ?? rest[0];
  if (family.claims === "named" && (name === undefined || !mount.names.has(name))) return undefined;
  const endpointRaw = mount.endpointAt < 0 ? undefined : raw[mount.endpointAt + 1]!;
  const endpointDecoded = endpointRaw === undefined ? "" : decodeOne(endpointRaw);
  const malformed = decoded === undefined || endpointDecoded === undefined;
  return {
    request: {
      method,
      headers,
      url,
      endpointId: endpointDecoded ?? endpointRaw ?? "",
      path: decoded ?? rest,
    },
    malformed,
  };
}

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({});
const NO_BODY = Object.freeze(noBody("request body"));

/**
 * Serves a family through its declared routes: the checks of {@link decide} (key, endpoint, access,
 * path, method), then the route's rate-limit row (429), before a byte of the body is read; a
 * refused request's body is dropped as it arrives. Then the body, read under the route's limits
 * and parsed; a failed read is answered by the family (or its `around`), never by the handler.
 */
export function serveFamily<C, A extends string>(family: RouteFamily<C, A>): RouteHandler {
  return async (req, res, url) => {
    const found = requestOf(family, req.method ?? "GET", req.headers, url);
    if (found === undefined) return false;
    const { request } = found;
    const decision = decide(family, request, found.malformed);
    const base: RouteCall = {
      method: request.method,
      headers: request.headers,
      url,
      endpointId: request.endpointId,
      path: request.path,
      req,
      res,
      params: decision.ok ? decision.params : NO_PARAMS,
    };
    if (!decision.ok) {
      dropBody(req);
      family.refuse(base, decision.refusal);
      return true;
    }
    const { route } = decision;
    if (route.rate !== "unlimited" && family.admit !== undefined) {
      const refusal = family.admit(base, route.rate);
      if (refusal !== undefined) {
        dropBody(req);
        family.refuse(base, refusal);
        return true;
      }
    }
    const options = route.body === "none" ? NO_BODY : route.body(family.context, base);
    const body: JsonRead = await readJson(req, options);
    const next = (parsed: Extract<JsonRead, { ok: true }>) => route.handle(family.context, base, parsed);
    if (family.around !== undefined) {
      await family.around(base, body, next);
    } else if (!body.ok) {
      family.refuse(base, { reason: "body", status: body.status, message: body.message });
    } else {
      await next(body);
    }
    return true;
  };
}

/** Throws when two families under one mount name the same route (the first would hide the second). */
export function assertDistinctNames(...tables: readonly Readonly<Record<string, unknown>>[]): void {
  const seen = new Set<string>();
  for (const table of tables) {
    for (const name of Object.keys(table)) {
      if (seen.has(name)) throw new Error(`two routes named "${name}"`);
      seen.add(name);
    }
  }
}
