import { settle } from "../../task-sink.js";
import type { LbEndpointOptions } from "../lb/index.js";
import type { EndpointUpdate, ExtraRoutes, LbEndpointUpdate, WorkerSpawner } from "../options.js";
import { mountManagementRoutes } from "./mount.js";
import type { EndpointEvent, EndpointWorkerView } from "./route-context.js";
import { createManagementRoutes, type ManagementRoutes } from "./routes.js";
import type { StoredEndpoint, TemplateSeed } from "./store.js";

/** Options of {@link harnessManagement}. */
export interface HarnessManagementOptions {
  /** The key management callers must send (the harness's main key). */
  readonly apiKey: string;
  /**
   * Starts the workers of an endpoint created through `POST /v2/serverless` — the handler's
   * workers. Without it, the new endpoint takes jobs only from workers that connect on their own.
   */
  readonly spawn?: WorkerSpawner | undefined;
  /** Templates present from the start. */
  readonly templates?: readonly TemplateSeed[];
  /** Time source for `createdAt`, ms since the epoch. @default Date.now */
  readonly clock?: () => number;
  /** Serve the retired v1 template lookup instead of answering v1 paths 410 (see ManagementRoutesOptions.v1). @default false */
  readonly v1?: boolean;
  /** Receives a failure to register an endpoint with the harness. @default ignore */
  readonly onError?: (err: unknown) => void;
}

/** What the emulation changes on a harness: `Harness` fits. */
export interface EndpointTarget {
  addEndpoint(options: ReturnType<typeof endpointOptionsOf>): unknown;
  /**
   * Adds a load-balancing endpoint (one created with `type: LOAD_BALANCER`). A target without it
   * gets such an endpoint through `addEndpoint`, as a queue endpoint.
   */
  addLoadBalancer?(options: LbEndpointOptions): unknown;
  removeEndpoint(endpointId: string): unknown;
  /**
   * Applies a PATCH's `timeout` and worker counts to a queue endpoint (`Harness.updateEndpoint`).
   * A target without it keeps the ones the endpoint was created with.
   */
  updateEndpoint?(endpointId: string, change: EndpointUpdate): unknown;
  /**
   * Applies a PATCH's worker counts and `scaling.requestCount` to a load-balancing endpoint's
   * fleet (`Harness.updateLoadBalancer`). A target without it keeps the ones it was created with.
   */
  updateLoadBalancer?(endpointId: string, change: LbEndpointUpdate): unknown;
  /** The endpoint's workers now, for `workers` and `releases`. */
  workersOf?(endpointId: string): readonly EndpointWorkerView[];
  /** Stops a worker the harness started so a fresh one replaces it (a new release rolling out). */
  replaceWorker?(endpointId: string, workerId: string): unknown;
}

/** The management emulation bound to a harness. */
export interface HarnessManagement {
  readonly routes: ManagementRoutes;
  /** The node:http handler for the harness's `extraRoutes` seam. */
  readonly extraRoutes: ExtraRoutes;
  /**
   * Connects the harness that created endpoints are added to and deleted ones removed from; events
   * before this are kept and replayed.
   */
  attach(harness: EndpointTarget): void;
}

/**
 * The record's `workers.idleTimeout` (seconds, 1–3600 as the routes check it) in ms, or undefined
 * when it has none (a queue endpoint scaling on REQUEST_COUNT).
 */
function idleTimeoutMsOf(endpoint: StoredEndpoint): number | undefined {
  const seconds = endpoint.workers.idleTimeout;
  return typeof seconds === "number" && Number.isInteger(seconds) && seconds >= 1 && seconds <= 3600
    ? seconds * 1_000
    : undefined;
}

/**
 * The harness endpoint settings for a created endpoint: its `timeout` as the execution timeout,
 * its worker counts, and its `workers.idleTimeout` as the scaler's idle timeout.
 */
export function endpointOptionsOf(event: EndpointEvent, spawn: WorkerSpawner | undefined) {
  const { endpoint } = event;
  const timeout = endpoint.timeout;
  const base = {
    id: endpoint.id,
    ...(typeof timeout === "number" && Number.isInteger(timeout) && timeout > 0
      ? { executionTimeoutMs: timeout }
      : {}),
  };
  if (spawn === undefined) return base;
  const min = endpoint.workers.min;
  const idleTimeoutMs = idleTimeoutMsOf(endpoint);
  return {
    ...base,
    spawn,
    minWorkers: min,
    maxWorkers: Math.max(1, min, endpoint.workers.max),
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
  };
}

/**
 * The harness's load-balancing endpoint for an endpoint created with `type: LOAD_BALANCER`: its
 * route `/lb/<id>/...`, and with `spawn` a fleet of the handler's workers in load-balancing mode —
 * `workers.min` kept, up to `workers.max` started as requests wait, each taking the endpoint's
 * `REQUEST_COUNT` at once, and those above `workers.min` stopped after `workers.idleTimeout`
 * seconds with no request.
 */
export function lbOptionsOf(event: EndpointEvent, spawn: WorkerSpawner | undefined): LbEndpointOptions {
  const { endpoint } = event;
  if (spawn === undefined) return { id: endpoint.id };
  const scaling = endpoint["scaling"] as { type?: unknown; requestCount?: unknown } | undefined;
  const count = scaling?.type === "REQUEST_COUNT" ? scaling.requestCount : undefined;
  const min = endpoint.workers.min;
  const idleTimeoutMs = idleTimeoutMsOf(endpoint);
  return {
    id: endpoint.id,
    fleet: {
      spawn,
      minWorkers: min,
      maxWorkers: Math.max(1, min, endpoint.workers.max),
      concurrency: typeof count === "number" && Number.isSafeInteger(count) && count >= 1 ? count : 1,
      ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    },
  };
}

/** The endpoint's container `env`, its string values only (the routes accept nothing else). */
function containerEnv(endpoint: StoredEndpoint | undefined): Record<string, string> {
  const env = endpoint?.["env"];
  if (typeof env !== "object" || env === null) return {};
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (typeof value === "string") out[name] = value;
  return out;
}

/**
 * Binds the management emulation to a harness: an endpoint created with `POST /v2/serverless`
 * becomes a harness endpoint (same id) whose jobs run on workers from `spawn` — with
 * `type: LOAD_BALANCER`, a load-balancing endpoint whose requests reach workers from `spawn` in
 * load-balancing mode ({@link lbOptionsOf}) — and
 * `DELETE /v2/serverless/{id}` removes it (`Harness.removeEndpoint`: its workers stop, its jobs go).
 *
 * @example
 * const management = harnessManagement({ apiKey, spawn });
 * await using h = await startHarness({ apiKey, endpoints: [], extraRoutes: management.extraRoutes });
 * management.attach(h);
 */
export function harnessManagement(options: HarnessManagementOptions): HarnessManagement {
  let harness: EndpointTarget | undefined;
  const pending: Array<(target: EndpointTarget) => unknown> = [];
  const apply = (change: (target: EndpointTarget) => unknown) => {
    if (harness === undefined) {
      pending.push(change);
      return;
    }
    try {
      const result = change(harness);
      if (result instanceof Promise) settle(result, (err) => options.onError?.(err));
    } catch (err) {
      options.onError?.(err);
    }
  };
  // A worker's container has the endpoint's `env` (its template's, merged with the endpoint's own
  // at create; the latest release's after a PATCH), and the platform's variables over it.
  const spawnFor = (endpointId: string): WorkerSpawner | undefined => {
    const spawn = options.spawn;
    if (spawn === undefined) return undefined;
    return (env, report) => spawn({ ...containerEnv(routes.store.endpoint(endpointId)), ...env }, report);
  };
  const register = (event: EndpointEvent) =>
    apply((target) => {
      const spawn = spawnFor(event.endpoint.id);
      return event.endpoint.type === "LOAD_BALANCER" && target.addLoadBalancer !== undefined
        ? target.addLoadBalancer(lbOptionsOf(event, spawn))
        : target.addEndpoint(endpointOptionsOf(event, spawn));
    });
  const unregister = (endpointId: string) => apply((target) => target.removeEndpoint(endpointId));
  // A PATCH's timeout, worker counts, idle timeout and (load-balancing) request count take effect
  // on the harness endpoint, read from the record as at create: the same rules, max(1, min, max)
  // included; a record left without an idle timeout (a queue endpoint moved to REQUEST_COUNT)
  // turns the scale-down off.
  const update = (event: EndpointEvent) =>
    apply((target) => {
      const id = event.endpoint.id;
      const spawn = spawnFor(id);
      if (event.endpoint.type === "LOAD_BALANCER" && target.addLoadBalancer !== undefined) {
        const fleet = lbOptionsOf(event, spawn).fleet;
        if (fleet === undefined) return undefined;
        const { minWorkers, maxWorkers, concurrency, idleTimeoutMs } = fleet;
        return target.updateLoadBalancer?.(id, {
          ...(minWorkers === undefined ? {} : { minWorkers }),
          ...(maxWorkers === undefined ? {} : { maxWorkers }),
          ...(concurrency === undefined ? {} : { concurrency }),
          idleTimeoutMs: idleTimeoutMs ?? null,
        });
      }
      const options = endpointOptionsOf(event, spawn);
      return target.updateEndpoint?.(id, {
        ...("executionTimeoutMs" in options ? { executionTimeoutMs: options.executionTimeoutMs } : {}),
        ...("minWorkers" in options
          ? {
              minWorkers: options.minWorkers,
              maxWorkers: options.maxWorkers,
              idleTimeoutMs: "idleTimeoutMs" in options ? options.idleTimeoutMs : null,
            }
          : {}),
      });
    });
  // A new release rolls out as the workers started before it are replaced.
  const rollOut = (event: EndpointEvent) => {
    if (!event.rollout) return;
    apply((target) => {
      const id = event.endpoint.id;
      for (const worker of target.workersOf?.(id) ?? [])
        if (routes.store.pinnedVersion(id, worker.id) !== undefined) target.replaceWorker?.(id, worker.id);
    });
  };
  const routes = createManagementRoutes({
    apiKey: options.apiKey,
    ...(options.templates === undefined ? {} : { templates: options.templates }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.v1 === undefined ? {} : { v1: options.v1 }),
    onEndpointCreated: register,
    onEndpointUpdated: (event) => {
      update(event);
      rollOut(event);
    },
    onEndpointDeleted: unregister,
    workers: (endpointId) => harness?.workersOf?.(endpointId) ?? [],
    ...(options.onError === undefined ? {} : { onHookError: options.onError }),
  });
  return {
    routes,
    extraRoutes: mountManagementRoutes(routes),
    attach(target) {
      harness = target;
      for (const change of pending.splice(0)) apply(change);
    },
  };
}
