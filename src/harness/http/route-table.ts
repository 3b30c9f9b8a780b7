import type { IncomingMessage, ServerResponse } from "node:http";
import type { RateOperation } from "../../protocol/limits.js";
import type { AuthResult } from "./auth.js";
import type { JsonRead, ReadJsonOptions } from "./read-json.js";

/**
 * Every harness route — client, worker, OpenAI, management, dashboard — is one {@link RouteSpec}:
 * method, path pattern with typed params, access, rate-limit row, body, handler. A family
 * ({@link RouteFamily}) groups the routes under one mount with one error shape; the router
 * (router.ts) enforces every field, in the same order for every family (docs/harness.md,
 * "Routes"). The compiler checks the fields: `rate` has no default (a route the platform does not
 * limit says `"unlimited"`), a handler reads only the params its path declares, and a family's
 * table keys its routes by their first path segment.
 */

/**
 * The methods harness routes take. HEAD only where a route lists it: the GET routes of the API
 * take jobs and read streams, which a HEAD must not do with its answer thrown away.
 */
export type Method = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";
/** A route that answers every method itself (a retired API's 410, a 501 for what is not emulated). */
export const ANY_METHOD = "*";

type ParamOf<S extends string> = S extends `:${infer N}` ? N : S extends `*${infer N}` ? N : never;
type ParamNames<P extends string> = P extends `${infer Head}/${infer Tail}`
  ? ParamOf<Head> | ParamNames<Tail>
  : ParamOf<P>;
/**
 * The params a path pattern declares: `"job-done/:workerId/:jobId"` gives `{workerId, jobId}`; a
 * `*rest` segment takes the rest of the path (one or more non-empty segments, joined with `/`).
 */
export type PathParams<P extends string> = string extends P
  ? Readonly<Record<string, string>>
  : { readonly [K in ParamNames<P>]: string };

/** What a route's checks see of a request (no body, no response): also what the pure management API gets. */
export interface RouteRequest {
  readonly method: string;
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly url: URL;
  /** The endpoint the mount names (`/v2/:endpoint/`), "" for mounts without one. */
  readonly endpointId: string;
  /** The decoded path segments after the mount. */
  readonly path: readonly string[];
}

/** One request on its way through a route. */
export interface RouteCall<P extends string = string> extends RouteRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly params: PathParams<P>;
}

/** A body the router has read and parsed under the route's limits. */
export type ParsedBody = Extract<JsonRead, { ok: true }>;

/** Why the router answered instead of the route: the checks every route goes through, in order. */
export type Refusal =
  | { readonly reason: "key" | "forbidden" | "endpoint" | "malformed" | "path" }
  | { readonly reason: "method"; readonly allow: readonly string[]; readonly pattern: string }
  | {
      readonly reason: "rate" | "body";
      readonly status: number;
      readonly message: string;
      readonly headers?: Readonly<Record<string, string>>;
    };

/**
 * One route. `C` is its family's context, `A` its family's access kinds, `P` its path pattern
 * (relative to the family's mount; the first segment is the route's name).
 */
export interface RouteSpec<C, A extends string, P extends string = string> {
  readonly method: Method | readonly Method[] | typeof ANY_METHOD;
  readonly path: P;
  /** Whose key opens it; the family says what each access kind checks. */
  readonly access: A;
  /** Its row of the platform's rate-limit table, or `"unlimited"` where the platform lists none. */
  readonly rate: RateOperation | "unlimited";
  /** `"none"`: up to 64 KiB read as text and dropped; else how its JSON body is read. */
  readonly body: "none" | ((ctx: C, request: RouteRequest) => ReadJsonOptions);
  /** Serves the request once every check has passed and the body is read and parsed. */
  handle(ctx: C, call: RouteCall<NoInfer<P>>, body: ParsedBody): void | Promise<void>;
}

/** Builds the route helper of a family: `route({...})` keeps its path literal, so params are typed. */
export function routeOf<C, A extends string>() {
  return <const P extends string>(spec: RouteSpec<C, A, P>): RouteSpec<C, A, P> => spec;
}

/** A family's table: every route keyed by its name (its path's first segment); a route may take several patterns. */
export type RouteTableOf<C, A extends string, K extends string> = {
  readonly [N in K]: RouteSpec<C, A, N | `${N}/${string}`> | readonly RouteSpec<C, A, N | `${N}/${string}`>[];
};

/** What a family of routes (client, worker, OpenAI, management, dashboard) shares. */
export interface RouteFamily<C, A extends string> {
  /** For messages and tests: `"client"`, `"worker"`. */
  readonly name: string;
  /**
   * Where its routes live: literal segments and at most one `:endpoint`, e.g. `"/v2/:endpoint/"`,
   * `"/_runlet/api/"`, `"/"`.
   */
  readonly mount: string;
  /**
   * Which paths under the mount are the family's: `"named"` only those whose next segment names
   * one of its routes (others go on to the next family), `"all"` every one (unknown ones get 404
   * after the key check).
   */
  readonly claims: "named" | "all";
  readonly context: C;
  readonly routes: readonly RouteSpec<C, A, string>[];
  /** The access of a claimed path no route's pattern fits (its key is checked before the 404). */
  readonly defaultAccess: A;
  /** What each access kind checks. */
  readonly authorize: (access: A, request: RouteRequest) => AuthResult;
  /** Whether the mount's endpoint exists (checked after the key). @default every one */
  readonly hasEndpoint?: (endpointId: string) => boolean;
  /** Takes a slot of a rate-limit row, freed when the answer is done; or refuses (429). */
  readonly admit?: (call: RouteCall, operation: RateOperation) => Refusal | undefined;
  /** Answers a refusal in the family's error shape. */
  readonly refuse: (call: RouteCall, refusal: Refusal) => void;
  /**
   * Runs around each handler once its body is read, failed or not (worker routes record the
   * request and apply injected faults first): answers `body` itself when it failed, else calls
   * `next`. @default a failed body is refused (`reason: "body"`), else `next`
   */
  readonly around?: (
    call: RouteCall,
    body: JsonRead,
    next: (body: ParsedBody) => void | Promise<void>,
  ) => void | Promise<void>;
}

/** Lists a family's table, each route once (a name may hold several patterns). */
export function routesOf<C, A extends string>(
  table: Readonly<Record<string, RouteSpec<C, A> | readonly RouteSpec<C, A>[]>>,
): RouteSpec<C, A>[] {
  return Object.values(table).flatMap((entry) => (Array.isArray(entry) ? entry : [entry as RouteSpec<C, A>]));
}

/** The body options of a route that takes none: up to 64 KiB read as text and dropped. */
export function noBody(subject: string): ReadJsonOptions {
  return { limitBytes: 65_536, maxDepth: 0, subject, kind: "text", tooLargeStatus: 400 };
}

/** The methods a route takes, for `allow` and messages. */
export function methodsOf(spec: {
  readonly method: RouteSpec<unknown, string>["method"];
}): readonly string[] {
  if (spec.method === ANY_METHOD) return [];
  return typeof spec.method === "string" ? [spec.method] : spec.method;
}

/** Whether `route` takes `method`. */
export function takesMethod(spec: { readonly method: RouteSpec<unknown, string>["method"] }, method: string) {
  const taken = spec.method;
  return (
    taken === ANY_METHOD ||
    (typeof taken === "string" ? taken === method : (taken as readonly string[]).includes(method))
  );
}

/**
 * Matches decoded path segments against a pattern; returns the params, or undefined. A `:name`
 * segment takes one non-empty segment; `*name` (last) takes one or more, joined with `/`.
 */
export function matchPattern(
  pattern: string,
  segments: readonly string[],
): Record<string, string> | undefined {
  return matchParts(pattern.split("/"), segments);
}

function matchParts(
  parts: readonly string[],
  segments: readonly string[],
): Record<string, string> | undefined {
  // Literal segments first: most patterns tried fail there, and then nothing is allocated.
  const star = parts.length > 0 && parts[parts.length - 1]!.startsWith("*");
  if (star ? segments.length < parts.length : segments.length !== parts.length) return undefined;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const first = part.charCodeAt(0);
    if (first === COLON || first === STAR) continue;
    if (part !== segments[i]) return undefined;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const first = part.charCodeAt(0);
    if (first === STAR) {
      const rest = segments.slice(i);
      if (rest.some((s) => s === "")) return undefined;
      params[part.slice(1)] = rest.join("/");
      return params;
    }
    if (first !== COLON) continue;
    const segment = segments[i]!;
    if (segment === "") return undefined;
    params[part.slice(1)] = segment;
  }
  return params;
}

const COLON = 0x3a;
const STAR = 0x2a;

/** One route of a compiled family: its spec and its pattern split into segments. */
export interface CompiledRoute<C, A extends string> {
  readonly spec: RouteSpec<C, A>;
  readonly parts: readonly string[];
}

/** A family with its mount and patterns split once, not on every request. */
export interface CompiledFamily<C, A extends string> {
  /** The mount's segments; `:endpoint` marks the endpoint's place. */
  readonly mount: readonly string[];
  readonly endpointAt: number;
  /** The routes' names (their first segments), for `claims: "named"`. */
  readonly names: ReadonlySet<string>;
  readonly routes: readonly CompiledRoute<C, A>[];
  /**
   * The routes a path whose first segment is `name` may fit, in declaration order: those named
   * `name` and those whose pattern starts with a param; {@link unnamed} for any other name.
   */
  readonly byName: ReadonlyMap<string, readonly CompiledRoute<C, A>[]>;
  /** The routes whose pattern starts with a param (`:file`), in declaration order. */
  readonly unnamed: readonly CompiledRoute<C, A>[];
}

const COMPILED = new WeakMap<object, CompiledFamily<never, string>>();

/** The family's compiled form, made on first use and kept with it. */
export function compiled<C, A extends string>(family: RouteFamily<C, A>): CompiledFamily<C, A> {
  const known = COMPILED.get(family) as CompiledFamily<C, A> | undefined;
  if (known !== undefined) return known;
  const mount = family.mount.split("/").filter((s) => s !== "");
  const routes = family.routes.map((spec) => ({ spec, parts: spec.path.split("/") }));
  const isParam = (part: string) => part.startsWith(":") || part.startsWith("*");
  const unnamed = routes.filter((r) => isParam(r.parts[0]!));
  const byName = new Map<string, CompiledRoute<C, A>[]>();
  for (const r of routes) {
    const name = r.parts[0]!;
    if (isParam(name) || byName.has(name)) continue;
    byName.set(
      name,
      routes.filter((x) => x.parts[0] === name || isParam(x.parts[0]!)),
    );
  }
  const made: CompiledFamily<C, A> = {
    mount,
    endpointAt: mount.indexOf(":endpoint"),
    names: new Set(routes.map((r) => r.parts[0]!)),
    routes,
    byName,
    unnamed,
  };
  COMPILED.set(family, made as unknown as CompiledFamily<never, string>);
  return made;
}

/** What the router decided about a request of a family, before its body: a route to serve, or a refusal. */
export type Decision<C, A extends string> =
  | { readonly ok: true; readonly route: RouteSpec<C, A>; readonly params: Record<string, string> }
  | { readonly ok: false; readonly refusal: Refusal };

/**
 * The checks before the body, in the one order every family goes through: key (401), endpoint
 * (404), the key's access to it (403), a path that does not decode (400), a path no route fits
 * (404), the method (405). Pure: the pure management API calls it too. Admission (429) comes
 * after, in the router, since it takes a slot.
 */
export function decide<C, A extends string>(
  family: RouteFamily<C, A>,
  request: RouteRequest,
  malformed: boolean,
): Decision<C, A> {
  let chosen: RouteSpec<C, A> | undefined;
  let params: Record<string, string> | undefined;
  let firstFit: RouteSpec<C, A> | undefined;
  let candidates: readonly CompiledRoute<C, A>[] = [];
  if (!malformed) {
    const table = compiled(family);
    candidates = table.byName.get(request.path[0] ?? "") ?? table.unnamed;
    for (const { spec, parts } of candidates) {
      const fit = matchParts(parts, request.path);
      if (fit === undefined) continue;
      firstFit ??= spec;
      if (takesMethod(spec, request.method)) {
        chosen = spec;
        params = fit;
        break;
      }
    }
  }
  const access = (chosen ?? firstFit)?.access ?? family.defaultAccess;
  const auth = family.authorize(access, request);
  if (auth === "unauthorized") return { ok: false, refusal: { reason: "key" } };
  if (family.hasEndpoint !== undefined && !family.hasEndpoint(request.endpointId)) {
    return { ok: false, refusal: { reason: "endpoint" } };
  }
  if (auth === "forbidden") return { ok: false, refusal: { reason: "forbidden" } };
  if (malformed) return { ok: false, refusal: { reason: "malformed" } };
  if (chosen !== undefined && params !== undefined) return { ok: true, route: chosen, params };
  if (firstFit === undefined) return { ok: false, refusal: { reason: "path" } };
  // The path fits, the method does not: every fitting route's methods are allowed.
  const fits = candidates.filter((r) => matchParts(r.parts, request.path) !== undefined);
  const allow = [...new Set(fits.flatMap((f) => methodsOf(f.spec)))];
  return { ok: false, refusal: { reason: "method", allow, pattern: firstFit.path } };
}

/** A header's value as one string (the first of repeated ones). */
export function headerOf(headers: RouteRequest["headers"], name: string): string | undefined {
  const value = headers[name];
  return typeof value === "string" ? value : value?.[0];
}

/**
 * Builds the table checker of a family: every route is keyed by its name, the first segment of
 * its path, so a route whose path does not start with its key, or one of another family's access
 * kinds, does not compile.
 */
export function tableOf<C, A extends string>() {
  return <const T extends RouteTableOf<C, A, Extract<keyof T, string>>>(table: T): T => table;
}
