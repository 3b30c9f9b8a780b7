import { RunletError } from "../../errors.js";
import { type ManagementAnswer, problem, v1Error } from "./answers.js";
import { EMULATED_V2_SEGMENTS, isManagementPath, segmentsOf } from "./paths.js";
import type { EndpointEvent, RouteContext } from "./route-context.js";
import { serverlessRoutes } from "./serverless-routes.js";
import { ManagementStore, type TemplateSeed } from "./store.js";
import { templateRoutes, v1TemplateLookup } from "./template-routes.js";

/** One HTTP request as the harness server hands it over. */
export interface ManagementRequest {
  readonly method: string;
  /** The path; a `?query` on it is read too. */
  readonly path: string;
  readonly query?: URLSearchParams | Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Header names in lower case (Node's `IncomingHttpHeaders` fits). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The raw body text ("" when none). */
  readonly body: string;
}

/** Options of {@link createManagementRoutes}. */
export interface ManagementRoutesOptions {
  /** The key callers must send as `Authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Time source for `createdAt`, in ms since the epoch. @default Date.now */
  readonly clock?: () => number;
  /**
   * Serve the v1 template lookup (`GET /v1/templates/{id}`), for tests of old clients. v1 was
   * retired on 2026-11-15 (docs/protocol.md, "Management API"): off, every `/v1/...` path answers 410 with the v1
   * error body `{message}`, whatever the key. @default false
   */
  readonly v1?: boolean;
  /** Templates present from the start (the caller's own, community ones, the operator's). */
  readonly templates?: readonly TemplateSeed[];
  /** Called after `POST /v2/serverless` succeeds: register a harness endpoint whose jobs run the handler. */
  readonly onEndpointCreated?: (event: EndpointEvent) => unknown;
  /** Called after `PATCH /v2/serverless/{id}` succeeds. */
  readonly onEndpointUpdated?: (event: EndpointEvent) => unknown;
  /** Called after `DELETE /v2/serverless/{id}` succeeds. */
  readonly onEndpointDeleted?: (endpointId: string) => unknown;
  /** Receives a hook's throw or rejection (the answer has already been decided). @default ignore */
  readonly onHookError?: (err: unknown) => void;
}

/** The management emulation: a pure request handler over an in-memory store. */
export interface ManagementRoutes {
  /** Answers a management request, or `undefined` when the path is not a management path. */
  handle(request: ManagementRequest): ManagementAnswer | undefined;
  /**
   * The answer a request gets before its body is read — 410 for a retired v1 path, 401 without the
   * key — or undefined when its body is to be read and handed to {@link handle}.
   */
  refuse(request: Omit<ManagementRequest, "body">): ManagementAnswer | undefined;
  /** The state, for tests and for the harness to read. */
  readonly store: ManagementStore;
}

function headerOf(headers: ManagementRequest["headers"], name: string): string | undefined {
  const value = headers[name];
  return typeof value === "string" ? value : value?.[0];
}

function queryOf(request: ManagementRequest): URLSearchParams {
  const out = new URLSearchParams(
    request.path.includes("?") ? request.path.slice(request.path.indexOf("?") + 1) : "",
  );
  const q = request.query;
  if (q instanceof URLSearchParams) for (const [k, v] of q) out.append(k, v);
  else if (q !== undefined) {
    for (const [k, v] of Object.entries(q)) {
      if (typeof v === "string") out.append(k, v);
      else if (v !== undefined) for (const item of v) out.append(k, item);
    }
  }
  return out;
}

/** What a `/v1/...` path answers (410) unless v1 is kept on. */
export const V1_RETIRED_MESSAGE =
  "the v1 management API was retired on 2026-11-15; use the v2 API (a template: GET /v2/templates/{templateId})";

/**
 * Creates the harness's copy of the management API's template and serverless parts:
 * v1 `GET /v1/templates/{id}` when `v1` is on (three include flags, 400/404 `{message}`; off,
 * every v1 path answers 410 as a retired API), v2 `/v2/templates`
 * and `/v2/serverless` CRUD with list wrappers and RFC 9457 problems. Other reserved v2
 * resources answer 501. See docs/management.md for how these paths are told from the job API's.
 *
 * @example
 * const mgmt = createManagementRoutes({ apiKey: "k", onEndpointCreated: ({ endpoint }) => addEndpoint(endpoint.id) });
 * const answer = mgmt.handle({ method: "GET", path: "/v2/templates", headers, body: "" });
 */
export function createManagementRoutes(options: ManagementRoutesOptions): ManagementRoutes {
  if (typeof options.apiKey !== "string" || options.apiKey.length === 0) {
    throw new RunletError(
      "RUNLET_HARNESS_CONFIG",
      "createManagementRoutes: apiKey must be a non-empty string",
    );
  }
  const store = new ManagementStore(options.templates);
  const context: RouteContext = {
    store,
    clock: options.clock ?? Date.now,
    hook(fn) {
      if (fn === undefined) return;
      try {
        const result = fn();
        if (result instanceof Promise) result.catch((err: unknown) => options.onHookError?.(err));
      } catch (err) {
        options.onHookError?.(err);
      }
    },
  };
  const expected = `Bearer ${options.apiKey}`;
  const templates = templateRoutes(context);
  const serverless = serverlessRoutes(context, {
    created: (e) => context.hook(options.onEndpointCreated && (() => options.onEndpointCreated?.(e))),
    updated: (e) => context.hook(options.onEndpointUpdated && (() => options.onEndpointUpdated?.(e))),
    deleted: (id) => context.hook(options.onEndpointDeleted && (() => options.onEndpointDeleted?.(id))),
  });

  const refuse = (request: Omit<ManagementRequest, "body">): ManagementAnswer | undefined => {
    const v1 = request.path.startsWith("/v1");
    // A retired API answers for no one: before the key check, as the platform's gone v1 does.
    if (v1 && options.v1 !== true) return v1Error(410, V1_RETIRED_MESSAGE);
    if (headerOf(request.headers, "authorization") !== expected) {
      const message = "missing or incorrect API key: send Authorization: Bearer <API_KEY>";
      return v1 ? v1Error(401, message) : problem(401, message);
    }
    return undefined;
  };

  return {
    store,
    refuse,
    handle(request) {
      if (!isManagementPath(request.path)) return undefined;
      const pathOnly = request.path.split("?")[0]!;
      const segments = segmentsOf(pathOnly);
      const v1 = pathOnly.startsWith("/v1");
      const refused = refuse(request);
      if (refused !== undefined) return refused;
      const method = request.method.toUpperCase();
      if (segments === undefined) return v1 ? v1Error(400, "malformed path") : problem(400, "malformed path");
      const [, resource, ...rest] = segments;
      if (v1) {
        if (resource === "templates" && rest.length === 1) {
          if (method !== "GET") return v1Error(405, `${method} is not allowed on /v1/templates/{templateId}`);
          return v1TemplateLookup(context, rest[0]!, queryOf(request));
        }
        return v1Error(404, "the harness serves only GET /v1/templates/{templateId} of the v1 API");
      }
      if (resource === undefined || !EMULATED_V2_SEGMENTS.has(resource)) {
        return problem(
          501,
          `the harness does not emulate /v2/${resource ?? ""}; it serves /v2/templates and /v2/serverless`,
        );
      }
      const table = resource === "templates" ? templates : serverless;
      return table(method, rest, request.body);
    },
  };
}
