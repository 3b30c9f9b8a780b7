import type { Dispatcher } from "undici";
import { callLimitsResolver } from "../call-limits.js";
import { RunletError } from "../errors.js";
import type { Logger } from "../log/index.js";
import type { TemplateV1 } from "../protocol/management/template.js";
import type { CallOptions } from "./api/call.js";
import {
  type BillingApi,
  billingApi,
  type CatalogApi,
  type ClustersApi,
  catalogApi,
  clustersApi,
} from "./api/catalog.js";
import { type PodsApi, podsApi } from "./api/pods.js";
import { type ServerlessApi, serverlessApi } from "./api/serverless.js";
import {
  type NetworkVolumesApi,
  networkVolumesApi,
  type RegistriesApi,
  registriesApi,
} from "./api/storage.js";
import {
  type GetTemplateV1Options,
  getTemplateV1,
  type TemplatesApi,
  templatesApi,
} from "./api/templates.js";
import {
  type CallSpec,
  DEFAULT_RETRY_METHODS,
  type HttpMethod,
  managementRetryPolicy,
  type PreparedRequest,
  prepareRequest,
  type Query,
  send,
  type TransportSettings,
} from "./transport.js";

/** The platform's published v2 management origin (the v2 OpenAPI document's server; paths start with `/v2`). */
export const DEFAULT_MANAGEMENT_BASE_URL = "https://api.runpod.io";
/** The platform's published v1 management origin (paths start with `/v1`). */
export const DEFAULT_MANAGEMENT_V1_BASE_URL = "https://rest.runpod.io";

/** The one-time warning of a client's first v1 call (docs/protocol.md, "Management API"). */
export const V1_RETIRED_WARNING =
  "the v1 management API was retired on 2026-11-15; use the v2 client: templates.get(id) instead of getTemplate(id)";
/** The warning's code (pino field, or Node's DeprecationWarning code without a logger). */
const V1_RETIRED_CODE = "RUNLET_MANAGEMENT_V1_RETIRED";

/** Options of {@link createManagementClient}. */
export interface ManagementClientOptions {
  /** The API key, sent as `Authorization: Bearer <key>` (docs/protocol.md, "Authentication"). Never logged or put in errors. */
  readonly apiKey: string;
  /**
   * Where `/v1/...` and `/v2/...` live: an origin, optionally with a path prefix. A trailing
   * `/v1` or `/v2` is dropped, so the `{base_url}` of the docs can be pasted as it is.
   * @default "https://api.runpod.io"
   */
  readonly baseUrl?: string;
  /** Where v1 lives, when not beside v2. @default baseUrl when that is given, else "https://rest.runpod.io" */
  readonly v1BaseUrl?: string;
  /**
   * The API family the client speaks. `"v2"` (the default) gives every v2 group plus the v1
   * template lookup; `"v1"` (retired 2026-11-15) gives only the v1 template lookup and `request()`.
   * @default "v2"
   */
  readonly version?: "v1" | "v2";
  /** Per-attempt timeout, in ms. @default 30_000 */
  readonly timeoutMs?: number;
  /** Retries of a 429 on a retryable method (GET, DELETE, PATCH, PUT). @default 4 */
  readonly maxRetries?: number;
  /** First back-off bound, in ms; doubles per attempt (full jitter). @default 500 */
  readonly retryBaseMs?: number;
  /** Longest wait between attempts, in ms; a `Retry-After` longer than this fails at once. @default 30_000 */
  readonly retryCapMs?: number;
  /** Methods retried on 429. POST is left out by default: a create must not run twice. @default ["GET","DELETE","PATCH","PUT"] */
  readonly retryMethods?: readonly HttpMethod[];
  /** The undici dispatcher to send through. @default undici's global dispatcher */
  readonly dispatcher?: Dispatcher;
  /**
   * A pino logger; calls are logged at debug (method, path, status — never the key). The first v1
   * call logs a one-time warn that v1 is retired; without a logger that warning is a Node
   * `DeprecationWarning` (code `RUNLET_MANAGEMENT_V1_RETIRED`) instead.
   */
  readonly logger?: Logger;
}

/** A raw call through the client's auth, retry and error handling. */
export interface RawRequest extends CallOptions {
  readonly method: HttpMethod;
  /** Path below the version prefix, e.g. `/serverless/abc`. */
  readonly path: string;
  /** @default the client's version */
  readonly version?: "v1" | "v2";
  readonly query?: Query;
  readonly body?: unknown;
}

/** What both client versions offer. */
export interface ManagementClientV1 {
  readonly version: "v1" | "v2";
  /**
   * `GET /v1/templates/{id}` with the three include flags (docs/protocol.md, "v1 retirement"); the v1 Template, validated.
   * @deprecated v1 was retired on 2026-11-15 (docs/protocol.md, "Management API"): use `templates.get(id)` (v2). The
   * first call logs a one-time warning.
   */
  getTemplate(id: string, options?: GetTemplateV1Options): Promise<TemplateV1>;
  /** Any call not covered by a typed method; answers parsed JSON (or text). */
  request(request: RawRequest): Promise<unknown>;
  /** The request a call would send, with the key redacted — for dry runs and logs. */
  describe(request: RawRequest): PreparedRequest;
}

/** The v2 client: every resource group of docs/protocol.md, "Management API". */
export interface ManagementClient extends ManagementClientV1 {
  readonly pods: PodsApi;
  readonly serverless: ServerlessApi;
  readonly templates: TemplatesApi;
  readonly networkVolumes: NetworkVolumesApi;
  readonly registries: RegistriesApi;
  readonly clusters: ClustersApi;
  readonly catalog: CatalogApi;
  readonly billing: BillingApi;
}

function invalidOption(message: string): RunletError {
  return new RunletError("RUNLET_CONFIG_INVALID", message);
}

const limitsOf = callLimitsResolver({
  timeoutName: "timeoutMs",
  timeoutMs: 30_000,
  maxRetries: 4,
  retryBaseMs: 500,
  retryCapMs: 30_000,
});

function normaliseBase(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (err) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `${name} must be an absolute http(s) URL, got ${JSON.stringify(raw)}`,
      {
        cause: err,
      },
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalidOption(`${name} must be an http(s) URL, got ${JSON.stringify(raw)}`);
  }
  url.search = "";
  url.hash = "";
  return url
    .toString()
    .replace(/\/+$/, "")
    .replace(/\/v[12]$/, "");
}

/** Merges defaults once, validates, and freezes the transport settings. */
function settingsOf(options: ManagementClientOptions): TransportSettings {
  if (typeof options.apiKey !== "string" || options.apiKey.trim() === "") {
    throw invalidOption("apiKey must be a non-empty string (the platform API key)");
  }
  const v2 = normaliseBase("baseUrl", options.baseUrl ?? DEFAULT_MANAGEMENT_BASE_URL);
  const v1 =
    options.v1BaseUrl !== undefined
      ? normaliseBase("v1BaseUrl", options.v1BaseUrl)
      : options.baseUrl !== undefined
        ? v2
        : DEFAULT_MANAGEMENT_V1_BASE_URL;
  const limits = limitsOf(options);
  return Object.freeze({
    apiKey: options.apiKey,
    baseUrls: Object.freeze({ v1, v2 }),
    timeoutMs: limits.timeoutMs,
    retry: managementRetryPolicy(limits.retry),
    retryMethods: new Set(options.retryMethods ?? DEFAULT_RETRY_METHODS),
    dispatcher: options.dispatcher,
    logger: options.logger,
    random: Math.random,
  });
}

/**
 * Creates a typed client for the platform's management API: v2 resource groups and the v1
 * template lookup (docs/protocol.md, "Management API" and "v1 retirement"), bearer auth, errors of both versions as
 * RUNLET_MANAGEMENT_HTTP, bodies validated before they are sent.
 *
 * @example
 * const mgmt = createManagementClient({ apiKey: process.env.RUNPOD_API_KEY! });
 * const endpoint = await mgmt.serverless.create({
 *   name: "echo", image: "me/echo:1", gpu: { id: "NVIDIA RTX A4000", count: 1 },
 *   workers: { min: 0, max: 3 },
 * });
 */
export function createManagementClient(
  options: ManagementClientOptions & { version: "v1" },
): ManagementClientV1;
export function createManagementClient(options: ManagementClientOptions): ManagementClient;
export function createManagementClient(
  options: ManagementClientOptions,
): ManagementClient | ManagementClientV1 {
  const version = options.version ?? "v2";
  if (version !== "v1" && version !== "v2") {
    throw invalidOption(`version must be "v1" or "v2", got ${JSON.stringify(version)}`);
  }
  const settings = settingsOf(options);
  let warnedV1 = false;
  // docs/protocol.md, "Management API": v1 was retired on 2026-11-15. Said once per client, on its first v1 call.
  const warnV1 = (): void => {
    if (warnedV1) return;
    warnedV1 = true;
    if (settings.logger !== undefined) settings.logger.warn({ code: V1_RETIRED_CODE }, V1_RETIRED_WARNING);
    else process.emitWarning(V1_RETIRED_WARNING, { type: "DeprecationWarning", code: V1_RETIRED_CODE });
  };
  const call = (spec: Omit<CallSpec, "version"> & { readonly version?: "v1" | "v2" }) => {
    if (spec.version === "v1") warnV1();
    return send(settings, { ...spec, version: spec.version ?? "v2" });
  };
  const toSpec = (r: RawRequest): CallSpec => ({
    version: r.version ?? version,
    method: r.method,
    path: r.path.startsWith("/") ? r.path : `/${r.path}`,
    query: r.query,
    body: r.body,
    signal: r.signal,
  });
  const base: ManagementClientV1 = {
    version,
    getTemplate: (id, flags) => getTemplateV1(call, id, flags),
    request: (r) => {
      const spec = toSpec(r);
      if (spec.version === "v1") warnV1();
      return send(settings, spec);
    },
    describe: (r) => prepareRequest(settings, toSpec(r), true),
  };
  if (version === "v1") return Object.freeze(base);
  return Object.freeze({
    ...base,
    pods: podsApi(call),
    serverless: serverlessApi(call),
    templates: templatesApi(call),
    networkVolumes: networkVolumesApi(call),
    registries: registriesApi(call),
    clusters: clustersApi(call),
    catalog: catalogApi(call),
    billing: billingApi(call),
  });
}
