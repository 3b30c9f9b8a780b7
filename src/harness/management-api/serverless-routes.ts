import { durationProblem } from "../../duration.js";
import { LB_PREFIX } from "../lb/lb-routes.js";
import { invalidBody, json, type ManagementAnswer, noContent, problem } from "./answers.js";
import { ramGbPerVcpu } from "./catalog-table.js";
import { documentProblems } from "./document-schemas.js";
import type { CrudResource, EndpointEvent, RouteContext } from "./route-context.js";
import { DEFAULT_DISK_GB, randomId, type StoredEndpoint } from "./store.js";

/** Worker counts and idle timeout of an endpoint created without them (the document's defaults). */
export const DEFAULT_WORKERS = Object.freeze({ min: 0, max: 3, idleTimeout: 10 });
/** Execution timeout of an endpoint created without `timeout`, ms (the document's default). */
export const DEFAULT_TIMEOUT_MS = 300_000;

/** Callbacks fired after a change is stored. */
export interface EndpointHooks {
  created(event: EndpointEvent): void;
  updated(event: EndpointEvent): void;
  deleted(endpointId: string): void;
}

/** The container settings a template brings to an endpoint, and the ones a release tracks. */
const CONTAINER_FIELDS = ["image", "args", "disk", "ports", "env", "registry"] as const;

type Body = Readonly<Record<string, unknown>>;
type Gpu = {
  pools?: string[];
  count?: number;
  excludedTypes?: string[];
  allowedCudaVersions?: string[];
  minCudaVersion?: string | null;
};

/**
 * The document's `requestUrls` of an endpoint served at `origin`: a load-balancing endpoint's
 * `base` is the harness's route for it, `/lb/<id>` (the platform's `https://<id>.api.runpod.ai`),
 * and `health` the worker health path behind it.
 */
export function requestUrlsOf(
  origin: string,
  id: string,
  type: StoredEndpoint["type"],
): Record<string, string> {
  if (type === "LOAD_BALANCER") {
    const base = `${origin}${LB_PREFIX}${id}`;
    return { base, health: `${base}/ping` };
  }
  const base = `${origin}/v2/${id}`;
  return {
    run: `${base}/run`,
    runSync: `${base}/runsync`,
    status: `${base}/status/{job_id}`,
    stream: `${base}/stream/{job_id}`,
    cancel: `${base}/cancel/{job_id}`,
    retry: `${base}/retry/{job_id}`,
    purgeQueue: `${base}/purge-queue`,
    health: `${base}/health`,
  };
}

/** The rules the document states in words (each a 400), past what its schemas check. */
function ruleProblems(body: Body): string[] {
  const out: string[] = [];
  const gpu = body["gpu"] as Gpu | undefined;
  if (
    (gpu?.allowedCudaVersions?.length ?? 0) > 0 &&
    typeof gpu?.minCudaVersion === "string" &&
    gpu.minCudaVersion !== ""
  )
    out.push("$.gpu: allowedCudaVersions and minCudaVersion are mutually exclusive");
  const cpu = body["cpu"] as { id: string; vcpuCount: number }[] | undefined;
  for (const [i, c] of (cpu ?? []).entries())
    if ((c.vcpuCount & (c.vcpuCount - 1)) !== 0)
      out.push(`$.cpu[${i}].vcpuCount: must be a power of two, got ${c.vcpuCount}`);
  const workers = body["workers"] as { min?: number; max?: number } | undefined;
  if (workers?.min !== undefined && workers.max !== undefined && workers.min > workers.max)
    out.push(`$.workers: min (${workers.min}) must be ≤ max (${workers.max})`);
  return out;
}

/**
 * A `timeout` the harness cannot run as its endpoint's execution timeout (a 400): the document
 * sets no bounds, and a timer lasts at most 2^31−1 ms.
 */
function timeoutProblem(timeout: unknown): string[] {
  if (timeout === undefined) return [];
  const why = durationProblem(timeout, 1);
  return why === undefined ? [] : [`$.timeout: must be ${why}, got ${String(timeout)}`];
}

/** An idle timeout asked for a queue endpoint that scales on REQUEST_COUNT: the document refuses it. */
function idleTimeoutProblem(type: unknown, scaling: unknown, workers: unknown): string[] {
  const asked = (workers as { idleTimeout?: unknown } | undefined)?.idleTimeout;
  return type === "QUEUE" &&
    (scaling as { type?: unknown } | undefined)?.type === "REQUEST_COUNT" &&
    asked !== undefined
    ? ["$.workers.idleTimeout: does not apply to a queue endpoint scaling on REQUEST_COUNT"]
    : [];
}

/** An endpoint's answer without `idleTimeout` where the document leaves it out (queue + REQUEST_COUNT). */
function withIdleRule(endpoint: StoredEndpoint): StoredEndpoint {
  const scaling = endpoint["scaling"] as { type?: string } | undefined;
  if (
    endpoint.type !== "QUEUE" ||
    scaling?.type !== "REQUEST_COUNT" ||
    endpoint.workers.idleTimeout === undefined
  )
    return endpoint;
  const { idleTimeout: _dropped, ...workers } = endpoint.workers;
  return { ...endpoint, workers };
}

function gpuAnswer(gpu: Gpu): Record<string, unknown> {
  const out: Record<string, unknown> = {
    pools: gpu.pools ?? [],
    count: gpu.count ?? 1,
    allowedCudaVersions: gpu.allowedCudaVersions ?? [],
    minCudaVersion: gpu.minCudaVersion === undefined || gpu.minCudaVersion === "" ? null : gpu.minCudaVersion,
  };
  if (gpu.excludedTypes !== undefined && gpu.excludedTypes.length > 0)
    out["excludedTypes"] = gpu.excludedTypes;
  return out;
}

function cpuAnswer(cpu: readonly { id: string; vcpuCount: number }[]): Record<string, unknown>[] {
  return cpu.map((c) => ({
    id: c.id,
    vcpuCount: c.vcpuCount,
    memory: Math.max(1, Math.round(c.vcpuCount * ramGbPerVcpu(c.id))),
  }));
}

/**
 * `/v2/serverless` and `/v2/serverless/{id}`: list, create, get, PATCH, delete, and the `workers`
 * and `releases` below an endpoint. Bodies are checked against the document's
 * `CreateEndpointRequest` / `UpdateEndpointRequest` (422 with every failure) and the rules its
 * text states (400); answers are the document's `Endpoint` with every required field and its
 * defaults.
 */
export function serverlessResource(context: RouteContext, hooks: EndpointHooks): CrudResource {
  const { store } = context;
  const notFound = (id: string) => problem(404, `endpoint ${id} not found`);
  const eventOf = (endpoint: StoredEndpoint, rollout = false): EndpointEvent => ({
    endpoint,
    rollout,
  });
  /** A template the caller may use: 404 when it is not theirs or public, 422 when it is not a serverless one. */
  const templateFor = (templateId: unknown): { answer: ManagementAnswer } | { fields: Body } | undefined => {
    if (typeof templateId !== "string" || templateId === "") return undefined;
    const t = store.template(templateId);
    if (t === undefined || (t.owner !== "self" && !t.template.public))
      return { answer: problem(404, `template ${templateId} not found`) };
    if (!t.template.serverless)
      return {
        answer: problem(422, `template ${templateId} is not a serverless template`, [
          "$.templateId: the template's serverless is false",
        ]),
      };
    return { fields: t.template };
  };
  /** Notes which release the workers running now are on, before a new one is made. */
  const pinWorkers = (endpointId: string) => {
    const current = store.releases(endpointId).at(-1)?.version;
    if (current === undefined) return;
    const running = context.workers(endpointId);
    // Pins of workers gone since are dropped first, so the pins never outnumber the workers.
    store.prunePins(endpointId, new Set(running.map((w) => w.id)));
    for (const w of running) store.pinWorker(endpointId, w.id, current);
  };

  return {
    name: "serverless",
    list: () => json(200, { endpoints: store.endpoints().map(withIdleRule) }),
    create(body, origin) {
      const problems = documentProblems("CreateEndpointRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      if ((body["gpu"] === undefined) === (body["cpu"] === undefined))
        return problem(400, "set exactly one of gpu or cpu", ["$: exactly one of gpu or cpu is required"]);
      const rules = [
        ...ruleProblems(body),
        ...timeoutProblem(body["timeout"]),
        ...idleTimeoutProblem(body["type"], body["scaling"], body["workers"]),
      ];
      if (rules.length > 0) return problem(400, "the endpoint is invalid", rules);
      const template = templateFor(body["templateId"]);
      if (template !== undefined && "answer" in template) return template.answer;
      const fromTemplate = template?.fields ?? {};
      const id = randomId(14);
      const type = body["type"] as StoredEndpoint["type"];
      const container: Record<string, unknown> = {
        args: "",
        disk: DEFAULT_DISK_GB,
        ports: [],
        env: {},
        registry: null,
      };
      for (const field of CONTAINER_FIELDS) {
        if (fromTemplate[field] !== undefined) container[field] = fromTemplate[field];
        if (body[field] !== undefined) container[field] = body[field];
      }
      container["env"] = {
        ...(fromTemplate["env"] as Body | undefined),
        ...(body["env"] as Body | undefined),
      };
      let gpu = body["gpu"] as Gpu | undefined;
      const templateCuda = fromTemplate["allowedCudaVersions"] as string[] | undefined;
      if (
        gpu !== undefined &&
        gpu.allowedCudaVersions === undefined &&
        gpu.minCudaVersion === undefined &&
        templateCuda !== undefined
      )
        gpu = { ...gpu, allowedCudaVersions: templateCuda };
      const endpoint: StoredEndpoint = withIdleRule({
        id,
        name: body["name"] as string,
        type,
        requestUrls: requestUrlsOf(origin, id, type),
        ...container,
        ...(gpu === undefined ? {} : { gpu: gpuAnswer(gpu) }),
        ...(body["cpu"] === undefined
          ? {}
          : { cpu: cpuAnswer(body["cpu"] as { id: string; vcpuCount: number }[]) }),
        workers: { ...DEFAULT_WORKERS, ...(body["workers"] as Body | undefined) },
        scaling: body["scaling"],
        dataCenterIds: body["dataCenterIds"] ?? [],
        networkVolumes: body["networkVolumes"] ?? [],
        timeout: (body["timeout"] as number | undefined) ?? DEFAULT_TIMEOUT_MS,
        flashboot: body["flashboot"] ?? "OFF",
        createdAt: new Date(context.clock()).toISOString(),
      } as StoredEndpoint);
      store.putEndpoint(endpoint, typeof body["templateId"] === "string" ? body["templateId"] : undefined);
      store.addRelease(id, context.clock(), []);
      hooks.created(eventOf(endpoint));
      return json(201, endpoint);
    },
    get(id) {
      const current = store.endpoint(id);
      return current === undefined ? notFound(id) : json(200, current);
    },
    remove(id) {
      if (store.endpoint(id) === undefined) return notFound(id);
      store.deleteEndpoint(id);
      hooks.deleted(id);
      return noContent();
    },
    update(id, body) {
      const current = store.endpoint(id);
      if (current === undefined) return notFound(id);
      const problems = documentProblems("UpdateEndpointRequest", body);
      if (problems !== undefined) return invalidBody(problems);
      if (body["gpu"] !== undefined && body["cpu"] !== undefined)
        return problem(400, "the endpoint update is invalid", ["$: give gpu or cpu, not both"]);
      if (body["gpu"] !== undefined && current["cpu"] !== undefined)
        return problem(400, "the endpoint update is invalid", [
          "$.gpu: this is a CPU endpoint; its compute family cannot change",
        ]);
      if (body["cpu"] !== undefined && current["gpu"] !== undefined)
        return problem(400, "the endpoint update is invalid", [
          "$.cpu: this is a GPU endpoint; its compute family cannot change",
        ]);
      const template = templateFor(body["templateId"]);
      if (template !== undefined && "answer" in template) return template.answer;
      const next: Record<string, unknown> = { ...current };
      // A template's container settings apply as if they were in the body; the body's win, env merges.
      const fromTemplate = template?.fields ?? {};
      for (const field of CONTAINER_FIELDS) {
        if (fromTemplate[field] !== undefined) next[field] = fromTemplate[field];
        if (body[field] !== undefined) next[field] = body[field];
      }
      if (template !== undefined || body["env"] !== undefined)
        next["env"] = { ...(fromTemplate["env"] as Body | undefined), ...(body["env"] as Body | undefined) };
      for (const field of [
        "name",
        "scaling",
        "dataCenterIds",
        "networkVolumes",
        "timeout",
        "flashboot",
      ] as const)
        if (body[field] !== undefined) next[field] = body[field];
      const gpu = body["gpu"] as Gpu | undefined;
      if (gpu !== undefined) {
        const old = current["gpu"] as Gpu;
        next["gpu"] = gpuAnswer({
          ...old,
          // `pools` replaces the selection, exclusions included.
          ...(gpu.pools === undefined ? {} : { pools: gpu.pools, excludedTypes: gpu.excludedTypes ?? [] }),
          ...(gpu.count === undefined ? {} : { count: gpu.count }),
          ...(gpu.allowedCudaVersions === undefined ? {} : { allowedCudaVersions: gpu.allowedCudaVersions }),
          ...(gpu.minCudaVersion === undefined ? {} : { minCudaVersion: gpu.minCudaVersion }),
        });
      }
      if (body["cpu"] !== undefined)
        next["cpu"] = cpuAnswer(body["cpu"] as { id: string; vcpuCount: number }[]);
      next["workers"] = { ...current.workers, ...(body["workers"] as Body | undefined) };
      const rules = [
        ...ruleProblems({ gpu: next["gpu"], workers: next["workers"] }),
        ...timeoutProblem(body["timeout"]),
        ...idleTimeoutProblem(current.type, next["scaling"], body["workers"]),
      ];
      if (rules.length > 0) return problem(400, "the endpoint update is invalid", rules);
      const updated = withIdleRule(next as StoredEndpoint);
      // Container changes make a new release, which rolls out as workers are replaced.
      const diff = CONTAINER_FIELDS.filter(
        (f) => JSON.stringify(current[f]) !== JSON.stringify(updated[f]),
      ).map((f) => ({ field: f, old: current[f] ?? null, new: updated[f] ?? null }));
      if (diff.length > 0) {
        pinWorkers(id);
        store.addRelease(id, context.clock(), diff);
      }
      store.putEndpoint(updated);
      hooks.updated(eventOf(updated, diff.length > 0));
      return json(200, updated);
    },
    below(id, rest) {
      const endpoint = store.endpoint(id);
      if (endpoint === undefined) return notFound(id);
      if (rest === "workers") return json(200, workersAnswer(context, endpoint));
      if (rest === "releases") return json(200, releasesAnswer(context, endpoint));
      return rest.startsWith("workers/")
        ? problem(501, `the harness does not emulate /v2/serverless/{id}/${rest}`)
        : problem(404, `no such path /v2/serverless/${id}/${rest}`);
    },
  };
}

/** Each worker running now with the release it runs: pinned at the last release, else the newest. */
function workersWithVersions(context: RouteContext, endpoint: StoredEndpoint) {
  const latest = context.store.releases(endpoint.id).at(-1)?.version ?? 1;
  const running = context.workers(endpoint.id);
  context.store.prunePins(endpoint.id, new Set(running.map((w) => w.id)));
  return running.map((w) => ({ ...w, version: context.store.pinnedVersion(endpoint.id, w.id) ?? latest }));
}

/** The document's `ListEndpointWorkersResponse` from the harness's own workers. */
function workersAnswer(context: RouteContext, endpoint: StoredEndpoint) {
  const latest = context.store.releases(endpoint.id).at(-1)?.version ?? 1;
  const gpuCount = (endpoint["gpu"] as Gpu | undefined)?.count ?? 0;
  const now = context.clock();
  const workers = workersWithVersions(context, endpoint).map((w) => ({
    id: w.id,
    status: w.status,
    isStale: w.version !== latest,
    version: w.version,
    gpuCount,
    image: (endpoint["image"] as string | undefined) ?? null,
    uptimeSeconds: Math.max(0, Math.floor((now - w.startedAt) / 1000)),
    gpuTypeId: null,
    dataCenterId: null,
    startedAt: new Date(w.startedAt).toISOString(),
  }));
  const count = (status: string) => workers.filter((w) => w.status === status).length;
  return {
    workers,
    summary: {
      running: count("RUNNING"),
      idle: count("IDLE"),
      initializing: count("INITIALIZING"),
      throttled: 0,
      unhealthy: count("UNHEALTHY"),
      total: workers.length,
    },
    endpointVersion: latest,
  };
}

/** The document's `ListEndpointReleasesResponse`: the releases, newest first, and how many workers run the newest. */
function releasesAnswer(context: RouteContext, endpoint: StoredEndpoint) {
  const releases = context.store.releases(endpoint.id);
  const latest = releases.at(-1)?.version ?? 1;
  const workers = workersWithVersions(context, endpoint);
  const onLatest = workers.filter((w) => w.version === latest).length;
  return {
    endpointVersion: latest,
    rollout: {
      inProgress: onLatest < workers.length,
      workersOnLatest: onLatest,
      workersTotal: workers.length,
      percentOnLatest: workers.length === 0 ? 100 : Math.floor((100 * onLatest) / workers.length),
    },
    releases: [...releases].reverse().map((r) => ({
      id: r.id,
      version: r.version,
      source: "MANUAL",
      buildId: null,
      createdByUserId: null,
      workerCount: workers.filter((w) => w.version === r.version).length,
      createdAt: new Date(r.at).toISOString(),
      diff: r.diff,
    })),
  };
}
