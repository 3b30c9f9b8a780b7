import type { ServerResponse } from "node:http";
import { RunletError } from "../../errors.js";
import { settle } from "../../task-sink.js";
import { MAX_JSON_DEPTH } from "../http/json-depth.js";
import { parseBodyText, type ReadJsonOptions } from "../http/read-json.js";
import {
  ANY_METHOD,
  decide,
  headerOf,
  type ParsedBody,
  type PathParams,
  type Refusal,
  type RouteFamily,
  type RouteRequest,
  type RouteSpec,
} from "../http/route-table.js";
import { type RouteHandler, requestOf, serveFamily } from "../http/router.js";
import { type ManagementAnswer, problem, v1Error } from "./answers.js";
import { catalogAnswer } from "./catalog-routes.js";
import { EMULATED_V2_SEGMENTS, isManagementPath, MANAGEMENT_V2_SEGMENTS } from "./paths.js";
import type { CrudResource, EndpointEvent, EndpointWorkerView, RouteContext } from "./route-context.js";
import { serverlessResource } from "./serverless-routes.js";
import { networkVolumesResource, registriesResource } from "./storage-routes.js";
import { ManagementStore, type TemplateSeed } from "./store.js";
import { templateResource, v1TemplateLookup } from "./template-routes.js";

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
  /** The workers running an endpoint, for `GET /v2/serverless/{id}/workers` and `releases`. @default none */
  readonly workers?: (endpointId: string) => readonly EndpointWorkerView[];
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
  /**
   * The same routes as a step of the harness's router (docs/harness.md, "Routes"): answers a
   * management path and resolves true, leaves any other alone (false, its body unread).
   */
  readonly serve: RouteHandler;
}

/** What a `/v1/...` path answers (410) unless v1 is kept on. */
export const V1_RETIRED_MESSAGE =
  "the v1 management API was retired on 2026-11-15; use the v2 API (a template: GET /v2/templates/{templateId})";
const KEY_MESSAGE = "missing or incorrect API key: send Authorization: Bearer <API_KEY>";

/** Largest management request body read, bytes; management bodies are small JSON objects. */
export const MAX_MANAGEMENT_BODY_BYTES = 1_048_576; // 1 MiB

/** Who may call a management route: the caller with the key, or anyone (a retired API's 410). */
type ManagementAccess = "key" | "none";

/** What the management routes work on. */
interface ManagementContext extends RouteContext {
  /** The `Authorization` header that opens the copy: `Bearer <apiKey>`. */
  readonly expected: string;
  readonly resources: { readonly [N in CrudResource["name"]]: CrudResource };
}

/** A management route: its answer is pure (the pure {@link ManagementRoutes.handle} calls it too). */
type ManagementRoute<P extends string = string> = RouteSpec<ManagementContext, ManagementAccess, P> & {
  answer(
    ctx: ManagementContext,
    request: RouteRequest & { readonly params: PathParams<P> },
    body: ParsedBody,
  ): ManagementAnswer;
};

/** Writes a management answer. */
export function sendAnswer(res: ServerResponse, answer: ManagementAnswer): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(answer.status, { ...answer.headers, "content-length": Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

const textBody = (): ReadJsonOptions => ({
  limitBytes: MAX_MANAGEMENT_BODY_BYTES,
  maxDepth: MAX_JSON_DEPTH,
  subject: "the body",
  kind: "text",
});
const objectBody = (): ReadJsonOptions => ({
  limitBytes: MAX_MANAGEMENT_BODY_BYTES,
  maxDepth: MAX_JSON_DEPTH,
  subject: "the body",
  object: { emptyMessage: "a JSON object body is required" },
});

function managementRoute<const P extends string>(
  spec: Omit<RouteSpec<ManagementContext, ManagementAccess, P>, "handle" | "rate" | "body"> & {
    readonly body: "object" | "text";
    answer(
      ctx: ManagementContext,
      request: RouteRequest & { readonly params: PathParams<NoInfer<P>> },
      body: ParsedBody,
    ): ManagementAnswer;
  },
): ManagementRoute<P> {
  return {
    ...spec,
    // The platform's management API publishes no rate-limit rows.
    rate: "unlimited",
    body: spec.body === "object" ? objectBody : textBody,
    handle: (ctx, call, body) => sendAnswer(call.res, spec.answer(ctx, call, body)),
  };
}

/** The body as the object the router checked it is. */
const objectOf = (body: ParsedBody) => body.value as Readonly<Record<string, unknown>>;

/**
 * The five routes of a CRUD resource, from its one description ({@link CrudResource}): list and
 * create on `/v2/<name>`, get, update (PATCH) and delete on `/v2/<name>/{id}`, and what lies below.
 */
function crudRoutes(name: CrudResource["name"]): ManagementRoute[] {
  const of = (ctx: ManagementContext) => ctx.resources[name];
  return [
    managementRoute({
      method: "GET",
      path: `${name}`,
      access: "key",
      body: "text",
      answer: (ctx) => of(ctx).list(),
    }),
    managementRoute({
      method: "POST",
      path: `${name}`,
      access: "key",
      body: "object",
      answer: (ctx, request, body) => of(ctx).create(objectOf(body), originOf(request)),
    }),
    managementRoute({
      method: "GET",
      path: `${name}/:id`,
      access: "key",
      body: "text",
      answer: (ctx, { params }) => of(ctx).get(params.id),
    }),
    managementRoute({
      method: "PATCH",
      path: `${name}/:id`,
      access: "key",
      body: "object",
      answer: (ctx, { params }, body) => of(ctx).update(params.id, objectOf(body)),
    }),
    managementRoute({
      method: "DELETE",
      path: `${name}/:id`,
      access: "key",
      body: "text",
      answer: (ctx, { params }) => of(ctx).remove(params.id),
    }),
    managementRoute({
      method: ANY_METHOD,
      path: `${name}/:id/*rest`,
      access: "key",
      body: "text",
      answer: (ctx, { params }) => of(ctx).below(params.id, params.rest),
    }),
  ] as ManagementRoute[];
}

/** The origin the caller reached the harness at, from its Host header. */
function originOf(request: RouteRequest): string {
  const host = headerOf(request.headers, "host");
  return host === undefined || host === "" ? "http://127.0.0.1" : `http://${host}`;
}

/** `GET /v2/catalog/...` from the fixed table. */
const CATALOG_ROUTES: readonly ManagementRoute[] = [
  managementRoute({
    method: "GET",
    path: "catalog/*rest",
    access: "key",
    body: "text",
    answer: (_ctx, { params }) => catalogAnswer(params.rest),
  }),
] as ManagementRoute[];

/** `/v2/<resource>...` the copy does not keep: 501 for every method and path below. */
function notEmulated(resource: string): ManagementRoute[] {
  const answer = () =>
    problem(
      501,
      `the harness does not emulate /v2/${resource}; it serves /v2/templates, /v2/serverless, /v2/network-volumes, /v2/registries and /v2/catalog`,
    );
  return [
    managementRoute({ method: ANY_METHOD, path: resource, access: "key", body: "text", answer }),
    managementRoute({ method: ANY_METHOD, path: `${resource}/*rest`, access: "key", body: "text", answer }),
  ] as ManagementRoute[];
}

/** Every v2 route: the CRUD resources, then each reserved resource the copy does not keep. */
export const MANAGEMENT_V2_ROUTES: readonly ManagementRoute[] = [
  ...crudRoutes("templates"),
  ...crudRoutes("serverless"),
  ...crudRoutes("network-volumes"),
  ...crudRoutes("registries"),
  ...CATALOG_ROUTES,
  ...[...MANAGEMENT_V2_SEGMENTS].filter((s) => !EMULATED_V2_SEGMENTS.has(s)).flatMap(notEmulated),
];

/** The v1 template lookup, served while v1 is kept on. */
const V1_ROUTES: readonly ManagementRoute[] = [
  managementRoute({
    method: "GET",
    path: "templates/:templateId",
    access: "key",
    body: "text",
    answer: (ctx, { params, url }) => v1TemplateLookup(ctx, params.templateId, url.searchParams),
  }),
] as ManagementRoute[];

/** A pattern as the platform's documents write it: `templates/:id` is `/v2/templates/{id}`. */
function shown(version: "v1" | "v2", pattern: string): string {
  return `/${version}/${pattern.replace(/:(\w+)/g, "{$1}")}`;
}

/** A refusal in v2's format (RFC 9457 problems). */
function v2Refusal(request: RouteRequest, refusal: Refusal): ManagementAnswer {
  switch (refusal.reason) {
    case "key":
    case "forbidden":
      return problem(401, KEY_MESSAGE);
    case "malformed":
      return problem(400, "malformed path");
    case "method":
      return problem(405, `${request.method} is not allowed on ${shown("v2", refusal.pattern)}`);
    case "endpoint":
    case "path":
      return problem(404, `no such path /v2/${request.path.join("/")}`);
    default:
      return problem(refusal.status, refusal.message);
  }
}

/** A refusal in v1's format (`{message}`); while v1 is retired, 410 for everything. */
function v1Refusal(v1: boolean, request: RouteRequest, refusal: Refusal): ManagementAnswer {
  if (!v1) return v1Error(410, V1_RETIRED_MESSAGE);
  switch (refusal.reason) {
    case "key":
    case "forbidden":
      return v1Error(401, KEY_MESSAGE);
    case "malformed":
      return v1Error(400, "malformed path");
    case "method":
      return v1Error(405, `${request.method} is not allowed on ${shown("v1", refusal.pattern)}`);
    case "endpoint":
    case "path":
      return v1Error(404, "the harness serves only GET /v1/templates/{templateId} of the v1 API");
    default:
      return v1Error(refusal.status, refusal.message);
  }
}

/** A management family: `/v2/<reserved resource>...`, or `/v1/...`. */
function managementFamily(
  ctx: ManagementContext,
  version: "v1" | "v2",
  v1: boolean,
): RouteFamily<ManagementContext, ManagementAccess> & {
  readonly answerRefusal: (r: RouteRequest, f: Refusal) => ManagementAnswer;
} {
  const answerRefusal = (request: RouteRequest, refusal: Refusal) =>
    version === "v2" ? v2Refusal(request, refusal) : v1Refusal(v1, request, refusal);
  return {
    name: `management ${version}`,
    mount: `/${version}/`,
    claims: version === "v2" ? "named" : "all",
    context: ctx,
    // A retired API answers for no one: 410 before the key check, as the platform's gone v1 does.
    routes: version === "v2" ? MANAGEMENT_V2_ROUTES : v1 ? V1_ROUTES : [],
    defaultAccess: version === "v1" && !v1 ? "none" : "key",
    authorize: (access, request) =>
      access === "none" || headerOf(request.headers, "authorization") === ctx.expected
        ? "ok"
        : "unauthorized",
    refuse(call, refusal) {
      const answer = answerRefusal(call, refusal);
      const allow =
        refusal.reason === "method" && refusal.allow.length > 0 ? refusal.allow.join(", ") : undefined;
      sendAnswer(
        call.res,
        allow === undefined ? answer : { ...answer, headers: { ...answer.headers, allow } },
      );
    },
    answerRefusal,
  };
}

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
    workers: options.workers ?? (() => []),
    hook(fn) {
      if (fn === undefined) return;
      try {
        const result = fn();
        if (result instanceof Promise) settle(result, (err) => options.onHookError?.(err));
      } catch (err) {
        options.onHookError?.(err);
      }
    },
  };
  const ctx: ManagementContext = {
    ...context,
    expected: `Bearer ${options.apiKey}`,
    resources: {
      templates: templateResource(context),
      serverless: serverlessResource(context, {
        created: (e) => context.hook(options.onEndpointCreated && (() => options.onEndpointCreated?.(e))),
        updated: (e) => context.hook(options.onEndpointUpdated && (() => options.onEndpointUpdated?.(e))),
        deleted: (id) => context.hook(options.onEndpointDeleted && (() => options.onEndpointDeleted?.(id))),
      }),
      "network-volumes": networkVolumesResource(),
      registries: registriesResource(context),
    },
  };
  const v1 = options.v1 === true;
  const families = { v2: managementFamily(ctx, "v2", v1), v1: managementFamily(ctx, "v1", v1) };

  /** The family, request and decision for a pure request; undefined for a path that is not a management path. */
  const decideOf = (request: Omit<ManagementRequest, "body">) => {
    if (!isManagementPath(request.path)) return undefined;
    const url = new URL(request.path, "http://management");
    for (const [k, v] of queryOf(request)) if (!url.searchParams.has(k)) url.searchParams.append(k, v);
    const family = url.pathname.startsWith("/v1") ? families.v1 : families.v2;
    const method = request.method.toUpperCase();
    const found = requestOf(family, method, request.headers, url);
    if (found === undefined) {
      const bare: RouteRequest = { method, headers: request.headers, url, endpointId: "", path: [] };
      return {
        family,
        request: bare,
        decision: { ok: false as const, refusal: { reason: "path" as const } },
      };
    }
    return { family, request: found.request, decision: decide(family, found.request, found.malformed) };
  };

  const serveV2 = serveFamily(families.v2);
  const serveV1 = serveFamily(families.v1);
  return {
    store,
    serve: async (req, res, url) => (await serveV2(req, res, url)) || serveV1(req, res, url),
    refuse(request) {
      const decided = decideOf(request);
      if (decided === undefined || decided.decision.ok) return undefined;
      return decided.family.answerRefusal(decided.request, decided.decision.refusal);
    },
    handle(request) {
      const decided = decideOf(request);
      if (decided === undefined) return undefined;
      const { family, decision } = decided;
      if (!decision.ok) return family.answerRefusal(decided.request, decision.refusal);
      const route = decision.route as ManagementRoute;
      const options = route.body === "none" ? textBody() : route.body(ctx, decided.request);
      const body = parseBodyText(request.body, Buffer.byteLength(request.body), options, undefined);
      if (!body.ok) {
        return family.answerRefusal(decided.request, {
          reason: "body",
          status: body.status,
          message: body.message,
        });
      }
      return route.answer(ctx, { ...decided.request, params: decision.params }, body);
    },
  };
}

function queryOf(request: Omit<ManagementRequest, "body">): URLSearchParams {
  const out = new URLSearchParams();
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
