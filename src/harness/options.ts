import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { z } from "zod";
import { RunletError } from "../errors.js";
import {
  describeValue,
  duration,
  durationOption,
  integer,
  integerOption,
  parseOptions,
} from "../option-schema.js";
import {
  EXECUTION_TIMEOUT_MS,
  MAX_RUN_PAYLOAD_BYTES,
  MAX_RUNSYNC_PAYLOAD_BYTES,
  MAX_STREAM_CHUNK_BYTES,
  RETENTION_MS,
} from "../protocol/limits.js";
import type { Clock } from "./clock.js";
import { realClock } from "./clock.js";
import { DEFAULT_GPU_TYPE_ID } from "./fleet/worker-env.js";
import type { StartupReport } from "./fleet/worker-startup.js";
import type { ScopedKey } from "./http/auth.js";
import { corsOriginsOf } from "./http/cors.js";
import { MAX_JSON_DEPTH } from "./http/json-depth.js";
import type { RateLimitOptions } from "./http/rate-limits.js";
import { STREAM_GATHER_MS } from "./jobs/stream-reader.js";
import type { WebhookOptions } from "./jobs/webhooks.js";
import type { LoadBalancerOptions } from "./lb/load-balancer.js";

/** A running worker the harness started; `close()` stops it (idempotent). */
export interface SpawnedWorker {
  close(): Promise<void>;
  /** Settles when the worker ends on its own (a crash, an exit): the scaler then starts another. */
  readonly exited?: Promise<unknown>;
}

/**
 * Starts one worker connected to the harness. `env` holds the platform variables of
 * docs/protocol.md, "Environment" (`RUNPOD_WEBHOOK_*`, `RUNPOD_AI_API_KEY`, `RUNPOD_POD_ID`, ...).
 * `runlet/testing` passes one that runs the handler in-process; {@link processSpawner} starts
 * `runlet start <handler>` as a child process. A spawner that calls `report` (first with
 * `{type: "starting"}`, then the worker's phases, setup progress and `ready`) has its worker shown
 * as starting until ready (docs/harness.md, "Workers starting"); one that does not has it counted
 * ready as soon as it connects.
 */
export type WorkerSpawner = (env: Record<string, string>, report: StartupReport) => Promise<SpawnedWorker>;

/** Settings of one endpoint. */
export interface EndpointOptions {
  /** Execution timeout of jobs without `policy.executionTimeout`, ms. @default 600000 */
  readonly executionTimeoutMs?: number;
  /** Starts workers for this endpoint; without it, workers connect on their own. */
  readonly spawn?: WorkerSpawner;
  /** Workers started at once and kept (needs `spawn`). @default 0 */
  readonly minWorkers?: number;
  /** Most workers the scaler runs at a time (needs `spawn`). @default 1 */
  readonly maxWorkers?: number;
  /** `RUNPOD_PING_INTERVAL` given to spawned workers, ms. @default the worker's own default */
  readonly pingIntervalMs?: number;
  /**
   * A worker the scaler started, above `minWorkers`, that has been connected and held no job for
   * this long (on the harness clock) is stopped, newest first — the platform's `workers.idleTimeout`
   * (needs `spawn`; 1 to 2^31−1), ms. @default none: workers are not scaled down while the harness runs
   */
  readonly idleTimeoutMs?: number;
}

/** What {@link Harness.updateEndpoint} changes on a queue endpoint; what is left out stays. */
export interface EndpointUpdate {
  /** Execution timeout of the jobs made from now on without `policy.executionTimeout`, ms (1 to 2^31−1). */
  readonly executionTimeoutMs?: number;
  /** Workers kept (needs `spawn`): a raised minimum starts workers at once. */
  readonly minWorkers?: number;
  /** Most workers at a time (needs `spawn`; ≥ 1 and ≥ minWorkers). */
  readonly maxWorkers?: number;
  /** Idle time after which a worker above the minimum is stopped (needs `spawn`; 1 to 2^31−1), ms; null: none. */
  readonly idleTimeoutMs?: number | null;
}

/** What {@link Harness.updateLoadBalancer} changes on a load-balancing endpoint's fleet; what is left out stays. */
export interface LbEndpointUpdate {
  /** Workers kept: a raised minimum starts workers at once. */
  readonly minWorkers?: number;
  /** Most workers at a time (≥ 1 and ≥ minWorkers). */
  readonly maxWorkers?: number;
  /** Requests each worker started from now on takes at once (≥ 1); running ones keep theirs. */
  readonly concurrency?: number;
  /** Time with no request in flight after which a worker above the minimum is stopped (1 to 2^31−1), ms; null: none. */
  readonly idleTimeoutMs?: number | null;
}

/** Size limits and retention, overridable (tests shrink them). */
export interface HarnessLimits {
  /** Largest `/run` body, bytes. @default 10 MiB */
  readonly runBytes?: number;
  /** Largest `/runsync` body, bytes. @default 20 MiB */
  readonly runsyncBytes?: number;
  /** Largest job-done body, bytes (larger answers 400, as the platform does). @default 20 MiB */
  readonly jobDoneBytes?: number;
  /** Largest job-stream body, bytes: a 1 MiB chunk plus room for its envelope. @default 1 MiB + 64 KiB */
  readonly streamBodyBytes?: number;
  /** Result retention of `/run` jobs, ms. @default 1800000 (30 min) */
  readonly runRetentionMs?: number;
  /** Result retention of `/runsync` jobs, ms (an explicit `wait` extends it, up to runsyncMaxRetentionMs). @default 60000 */
  readonly runsyncRetentionMs?: number;
  /** Longest `/runsync` retention reachable through `wait`, ms. @default 300000 (5 min) */
  readonly runsyncMaxRetentionMs?: number;
  /**
   * Most levels of objects and arrays a JSON body may nest (`/run`, `/runsync`, job-done,
   * job-stream, the OpenAI and dashboard routes); deeper answers 400 naming the limit.
   * @default 512 (docs/harness.md, "Limits and rate limits")
   */
  readonly maxJsonDepth?: number;
}

/** A handler for requests outside the job routes (e.g. management emulation); returns true when it answered. */
export type ExtraRoutes = (req: IncomingMessage, res: ServerResponse, url: URL) => boolean | Promise<boolean>;

/** The harness's live page (docs/harness.md, "The dashboard"). */
export interface DashboardOptions {
  /** Port of the page's own listener, on the harness's host; 0 picks a free one. @default 0 */
  readonly port?: number;
  /**
   * The request body the page's "run a request" form starts with (`runlet dev` passes
   * test_input.json). @default none: an example of the endpoint's input schema when its handler
   * was described (`Harness.describeEndpoint`), else `{"input": {}}`
   */
  readonly sampleRequest?: unknown;
}

/** Options of {@link startHarness}. */
export interface HarnessOptions {
  /** The main API key: opens every endpoint. @default a random key */
  readonly apiKey?: string;
  /** More keys, each limited to some endpoints (others answer 403). @default [] */
  readonly keys?: readonly ScopedKey[];
  /** Endpoints served. @default [{ id: "local" }] */
  readonly endpoints?: ReadonlyArray<{ readonly id: string } & EndpointOptions>;
  /** Address to bind. @default "127.0.0.1" */
  readonly host?: string;
  /** Port to bind; 0 picks a free one. @default 0 */
  readonly port?: number;
  /**
   * Host names (besides IP addresses, `localhost` and `host`) the harness and the dashboard answer
   * to; other Host headers get 403 (docs/harness.md, "Host names"). A leading dot allows a domain
   * and its subdomains; `true` answers any name. @default []
   */
  readonly allowedHosts?: readonly string[] | true;
  /**
   * Origins (`http://localhost:5173`, or `*` for any) whose web pages may call the `/v2/` routes
   * from a browser: their requests get CORS headers and their preflights a 204. The platform
   * documents no CORS, so this is for local development only (docs/openai.md, "Browsers (CORS)").
   * @default [] (no CORS headers, as the platform)
   */
  readonly corsOrigins?: readonly string[];
  /** How long job-take and job-stop long polls are held, ms. @default 30000 */
  readonly takeTimeoutMs?: number;
  /** How long `/stream` waits for a chunk before answering with none, ms. @default 500 */
  readonly streamHoldMs?: number;
  /** After a held `/stream` read gets its first chunk, how long it keeps gathering more before answering, ms. @default 5 */
  readonly streamGatherMs?: number;
  /**
   * A worker that sends no ping for this long (since its last ping, or since its first request) has
   * lapsed, whatever else it sends or holds open; its jobs go back to the queue once, ms. Also how
   * long a pinging worker's pings may leave out a job it holds (from the hand-out, or from the first
   * ping that left it out after one listed it) before that job is lost the same way.
   * @default 45000
   */
  readonly heartbeatTimeoutMs?: number;
  /**
   * What keeps a worker that has not pinged yet from lapsing: `"pings"` only (the platform's rule:
   * a worker that takes and posts but never pings is dead after `heartbeatTimeoutMs`), or
   * `"requests"`, any request of its own (a worker in memory has no heartbeat thread to ping with:
   * docs/harness.md, "A worker in memory"). Once a worker has pinged, only pings count either way.
   * @default "pings"; "requests" for `Harness.inMemory`
   */
  readonly keepAliveBy?: "pings" | "requests";
  /** Time for ttl, retention, timeouts, webhook retries, heartbeats, rate windows. @default the real clock */
  readonly clock?: Clock;
  readonly limits?: HarnessLimits;
  readonly rateLimits?: RateLimitOptions;
  readonly webhooks?: WebhookOptions;
  /** How many worker-route requests `requests()` keeps (the oldest are dropped). @default 50000 */
  readonly maxRecordedRequests?: number;
  /** How many bytes of worker-route requests (bodies, headers) `requests()` keeps (the oldest are dropped). @default 64 MiB */
  readonly maxRecordedRequestBytes?: number;
  /**
   * How many bytes ended jobs still within their result retention may hold (request, progress,
   * stream and result bodies); past it the oldest ended jobs are deleted early. @default 256 MiB
   */
  readonly maxFinishedJobBytes?: number;
  /** Consulted for every path that is not a `/v2/<endpoint>/<job route>`; unanswered paths get 404. */
  readonly extraRoutes?: ExtraRoutes;
  /**
   * Starts the workers of endpoints created through the management copy (`POST /v2/serverless`,
   * docs/management.md). @default the first configured endpoint's `spawn` (none: such endpoints
   * take jobs only from workers that connect on their own)
   */
  readonly managementSpawn?: WorkerSpawner;
  /**
   * Keep serving the retired v1 management API (`GET /v1/templates/{id}`) for old clients' tests.
   * Off, every `/v1/...` path answers 410 with a v1 `{message}` saying it was retired on
   * 2026-11-15 (docs/protocol.md, "Management API"), as the platform's retired API does. @default false
   */
  readonly managementV1?: boolean;
  /**
   * `RUNPOD_GPU_TYPE_ID` in `workerEnv()` (so in the env of the workers the harness starts). A runlet
   * worker substitutes it into the `gpu=` query of its worker requests; the Python SDK sends the
   * `$RUNPOD_GPU_TYPE_ID` placeholder as it is. The harness accepts any `gpu=` value. @default "LOCAL"
   */
  readonly gpuTypeId?: string;
  /** Where the harness logs (webhook failures, spawn errors). @default silent */
  readonly logger?: Logger;
  /**
   * Serves the live page on a second listener (`Harness.dashboardUrl`); `true` takes the defaults.
   * Its data needs the main `apiKey`. @default false (`runlet dev` and `runlet harness` turn it on)
   */
  readonly dashboard?: boolean | DashboardOptions;
  /**
   * Load-balancing endpoints (docs/load-balancing.md, "The harness and `runlet dev`"): requests to
   * `/lb/<id>/<any path>` go straight to one of the endpoint's workers, added with
   * `harness.loadBalancer(id).addWorker(...)`. @default none
   */
  readonly loadBalancers?: readonly LoadBalancerOptions[];
}

/** Options after defaults, validated and frozen. */
export interface ResolvedOptions {
  readonly apiKey: string;
  readonly keys: readonly ScopedKey[];
  readonly endpoints: ReadonlyArray<{ readonly id: string } & EndpointOptions>;
  readonly host: string;
  readonly port: number;
  readonly allowedHosts: readonly string[] | true;
  readonly corsOrigins: readonly string[];
  readonly takeTimeoutMs: number;
  readonly streamHoldMs: number;
  readonly streamGatherMs: number;
  readonly heartbeatTimeoutMs: number;
  /** Undefined: the default of the kind of harness (pings; requests in memory). */
  readonly keepAliveBy: "pings" | "requests" | undefined;
  readonly clock: Clock;
  readonly limits: Required<HarnessLimits>;
  readonly rateLimits: RateLimitOptions;
  readonly webhooks: WebhookOptions;
  readonly maxRecordedRequests: number;
  readonly maxRecordedRequestBytes: number;
  readonly maxFinishedJobBytes: number;
  readonly extraRoutes: ExtraRoutes | undefined;
  readonly managementSpawn: WorkerSpawner | undefined;
  readonly managementV1: boolean;
  readonly gpuTypeId: string;
  readonly logger: Logger | undefined;
  readonly dashboard: { readonly port: number; readonly sampleRequest: unknown } | undefined;
  readonly loadBalancers: readonly LoadBalancerOptions[];
}

function bad(message: string): RunletError {
  return new RunletError("RUNLET_HARNESS_CONFIG", message);
}

const endpointNumbersSchema = z.object({
  executionTimeoutMs: durationOption(1, EXECUTION_TIMEOUT_MS.default),
  minWorkers: integerOption(0, 0),
  maxWorkers: integer(1).optional(),
  idleTimeoutMs: duration(1).optional(),
});

// Strict: a misspelt field in a change would otherwise change nothing, silently.
const endpointUpdateSchema = z
  .object({
    executionTimeoutMs: duration(1).optional(),
    minWorkers: integer(0).optional(),
    maxWorkers: integer(1).optional(),
    idleTimeoutMs: duration(1).nullable().optional(),
  })
  .strict();

const lbUpdateSchema = z
  .object({
    minWorkers: integer(0).optional(),
    maxWorkers: integer(1).optional(),
    concurrency: integer(1).optional(),
    idleTimeoutMs: duration(1).nullable().optional(),
  })
  .strict();

/** A change of a running endpoint, checked: each field a number within its limit, or undefined (unchanged). */
export interface CheckedUpdate {
  readonly executionTimeoutMs?: number | undefined;
  readonly minWorkers?: number | undefined;
  readonly maxWorkers?: number | undefined;
  readonly concurrency?: number | undefined;
  /** null: no scale-down from now on. */
  readonly idleTimeoutMs?: number | null | undefined;
}

/**
 * Checks a change of a running endpoint (`updateEndpoint`, `updateLoadBalancer`) against its
 * bounds now: each field's limit, and the maximum at least the minimum once both apply.
 */
export function checkEndpointUpdate(
  method: "updateEndpoint" | "updateLoadBalancer",
  id: string,
  change: EndpointUpdate | LbEndpointUpdate,
  current: { readonly minWorkers: number; readonly maxWorkers: number } | undefined,
): CheckedUpdate {
  const where = `${method}(${JSON.stringify(id)}): `;
  if (typeof change !== "object" || change === null) throw bad(`${where}the change must be an object`);
  const parsed: CheckedUpdate =
    method === "updateEndpoint"
      ? parseOptions(endpointUpdateSchema, change, "RUNLET_HARNESS_CONFIG", where)
      : parseOptions(lbUpdateSchema, change, "RUNLET_HARNESS_CONFIG", where);
  if (parsed.minWorkers === undefined && parsed.maxWorkers === undefined) {
    if (parsed.idleTimeoutMs !== undefined && current === undefined) {
      throw bad(
        `${where}idleTimeoutMs needs workers the harness starts (a spawn function), and this endpoint has none`,
      );
    }
    return parsed;
  }
  if (current === undefined) {
    throw bad(
      `${where}minWorkers and maxWorkers need workers the harness starts (a spawn function), and this endpoint has none`,
    );
  }
  const min = parsed.minWorkers ?? current.minWorkers;
  const max = parsed.maxWorkers ?? current.maxWorkers;
  if (max < min) throw bad(`${where}maxWorkers (${max}) must be ≥ minWorkers (${min})`);
  return parsed;
}

const numbersSchema = z.object({
  port: integerOption(0, 0),
  takeTimeoutMs: durationOption(1, 30_000),
  streamHoldMs: durationOption(0, 500),
  streamGatherMs: durationOption(0, STREAM_GATHER_MS),
  heartbeatTimeoutMs: durationOption(1, 45_000),
  maxRecordedRequests: integerOption(1, 50_000),
  maxRecordedRequestBytes: integerOption(1, 64 * 1_048_576),
  maxFinishedJobBytes: integerOption(1, 256 * 1_048_576),
  dashboard: z.object({ port: integerOption(0, 0) }).prefault({}),
  webhooks: z
    .object({
      retries: integer(0).optional(),
      retryDelayMs: duration(0).optional(),
      timeoutMs: duration(1).optional(),
    })
    .optional(),
  limits: z
    .object({
      runBytes: integerOption(1, MAX_RUN_PAYLOAD_BYTES),
      runsyncBytes: integerOption(1, MAX_RUNSYNC_PAYLOAD_BYTES),
      jobDoneBytes: integerOption(1, MAX_RUNSYNC_PAYLOAD_BYTES),
      streamBodyBytes: integerOption(1, MAX_STREAM_CHUNK_BYTES + 65_536),
      runRetentionMs: durationOption(1, RETENTION_MS.run),
      runsyncRetentionMs: durationOption(1, RETENTION_MS.runsync),
      runsyncMaxRetentionMs: durationOption(1, RETENTION_MS.runsyncMax),
      maxJsonDepth: integerOption(1, MAX_JSON_DEPTH),
    })
    .prefault({}),
});

const ENDPOINT_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** Checks one endpoint's settings. */
export function checkEndpoint(ep: { readonly id: string } & EndpointOptions): void {
  if (!ENDPOINT_ID.test(ep.id)) {
    throw bad(`endpoint id must be 1–64 letters, digits, "-" or "_", got ${JSON.stringify(ep.id)}`);
  }
  const numbers = parseOptions(
    endpointNumbersSchema,
    {
      executionTimeoutMs: ep.executionTimeoutMs,
      minWorkers: ep.minWorkers,
      maxWorkers: ep.maxWorkers,
      idleTimeoutMs: ep.idleTimeoutMs,
    },
    "RUNLET_HARNESS_CONFIG",
    `endpoints[${ep.id}].`,
  );
  const min = numbers.minWorkers;
  const max = numbers.maxWorkers ?? Math.max(1, min);
  if (max < min) throw bad(`endpoints[${ep.id}].maxWorkers (${max}) must be ≥ minWorkers (${min})`);
  if ((ep.minWorkers !== undefined || ep.maxWorkers !== undefined) && ep.spawn === undefined) {
    throw bad(`endpoints[${ep.id}]: minWorkers and maxWorkers need a spawn function`);
  }
  if (ep.idleTimeoutMs !== undefined && ep.spawn === undefined) {
    throw bad(
      `endpoints[${ep.id}]: idleTimeoutMs needs a spawn function (it stops workers the harness started)`,
    );
  }
}

const lbFleetSchema = z.object({ idleTimeoutMs: duration(1).optional() });

/** Checks the idle timeout of a load-balancing endpoint's fleet (`addLoadBalancer`). */
export function checkLbFleet(id: string, fleet: { readonly idleTimeoutMs?: number } | undefined): void {
  if (fleet === undefined) return;
  parseOptions(
    lbFleetSchema,
    { idleTimeoutMs: fleet.idleTimeoutMs },
    "RUNLET_HARNESS_CONFIG",
    `addLoadBalancer(${JSON.stringify(id)}): fleet.`,
  );
}

/** Merges defaults once, validates, freezes. */
export function resolveOptions(options: HarnessOptions): ResolvedOptions {
  const apiKey = options.apiKey ?? `rl_${randomBytes(18).toString("base64url")}`;
  if (apiKey.trim() === "" || /\s/.test(apiKey))
    throw bad("apiKey must be a non-empty string without spaces");
  const endpoints = options.endpoints ?? [{ id: "local" }];
  const ids = new Set<string>();
  for (const ep of endpoints) {
    checkEndpoint(ep);
    if (ids.has(ep.id)) throw bad(`endpoint "${ep.id}" is listed twice`);
    ids.add(ep.id);
  }
  const gpuTypeId = options.gpuTypeId ?? DEFAULT_GPU_TYPE_ID;
  if (gpuTypeId.trim() === "" || /\s/.test(gpuTypeId)) {
    throw bad(`gpuTypeId must be a non-empty string without spaces, got ${JSON.stringify(gpuTypeId)}`);
  }
  const numbers = parseOptions(
    numbersSchema,
    {
      port: options.port,
      takeTimeoutMs: options.takeTimeoutMs,
      streamHoldMs: options.streamHoldMs,
      streamGatherMs: options.streamGatherMs,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      maxRecordedRequests: options.maxRecordedRequests,
      maxRecordedRequestBytes: options.maxRecordedRequestBytes,
      maxFinishedJobBytes: options.maxFinishedJobBytes,
      dashboard: typeof options.dashboard === "object" ? { port: options.dashboard.port } : undefined,
      limits: options.limits,
      webhooks: options.webhooks,
    },
    "RUNLET_HARNESS_CONFIG",
  );
  return Object.freeze({
    apiKey,
    keys: options.keys ?? [],
    endpoints,
    host: options.host ?? "127.0.0.1",
    port: numbers.port,
    allowedHosts: allowedHostsOf(options.allowedHosts),
    corsOrigins: corsOriginsOf(options.corsOrigins),
    takeTimeoutMs: numbers.takeTimeoutMs,
    streamHoldMs: numbers.streamHoldMs,
    streamGatherMs: numbers.streamGatherMs,
    heartbeatTimeoutMs: numbers.heartbeatTimeoutMs,
    keepAliveBy: keepAliveByOf(options.keepAliveBy),
    clock: options.clock ?? realClock(),
    limits: Object.freeze(numbers.limits),
    rateLimits: options.rateLimits ?? {},
    webhooks: options.webhooks ?? {},
    maxRecordedRequests: numbers.maxRecordedRequests,
    maxRecordedRequestBytes: numbers.maxRecordedRequestBytes,
    maxFinishedJobBytes: numbers.maxFinishedJobBytes,
    extraRoutes: options.extraRoutes,
    loadBalancers: options.loadBalancers ?? [],
    managementSpawn: options.managementSpawn ?? endpoints[0]?.spawn,
    managementV1: options.managementV1 ?? false,
    gpuTypeId,
    logger: options.logger,
    dashboard: dashboardOf(options.dashboard, numbers.dashboard.port),
  });
}

function allowedHostsOf(option: HarnessOptions["allowedHosts"]): readonly string[] | true {
  if (option === undefined) return [];
  if (option === true) return true;
  if (!Array.isArray(option)) {
    throw new RunletError("RUNLET_HARNESS_CONFIG", "allowedHosts must be an array of host names or true");
  }
  for (const name of option as unknown[]) {
    if (typeof name !== "string" || !/^\.?[A-Za-z0-9_.:[\]-]+$/.test(name)) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `allowedHosts must hold host names (letters, digits, dots, hyphens; a leading dot for a domain), got ${JSON.stringify(name)}`,
      );
    }
  }
  return Object.freeze([...option]);
}

function dashboardOf(option: HarnessOptions["dashboard"], port: number): ResolvedOptions["dashboard"] {
  if (option === undefined || option === false) return undefined;
  const o = option === true ? {} : option;
  return Object.freeze({
    port,
    sampleRequest: o.sampleRequest,
  });
}

function keepAliveByOf(value: unknown): "pings" | "requests" | undefined {
  if (value === undefined || value === "pings" || value === "requests") return value;
  throw bad(`keepAliveBy must be "pings" or "requests", got ${describeValue(value)}`);
}
