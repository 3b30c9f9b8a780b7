import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { RunletError } from "../../errors.js";
import { isBatchDefinition, isHandlerDefinition } from "../../handler/index.js";
import type { DeploySpec, EndpointCpu, EndpointGpuCreate, GpuType, Scaling } from "../../management/index.js";
import { integerFlag, usageError } from "../command.js";
import { allowTypeScript } from "../typescript.js";

/** The port a load-balancing worker serves on when `--port` is not given: a high one, so a non-root user can bind it. */
export const DEFAULT_LB_PORT = 8080;

/** A serverless GPU pool id (`ADA_24`, `AMPERE_80`): capitals, digits and underscores. */
const POOL_ID = /^[A-Z][A-Z0-9]*_[A-Z0-9_]+$/;

function int(name: string, raw: unknown, min: number, max = Infinity): number | undefined {
  return raw === undefined ? undefined : integerFlag(name, raw, min, min, max);
}

function str(raw: unknown): string | undefined {
  return typeof raw === "string" ? raw : undefined;
}

function list(raw: unknown): string[] {
  const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return values
    .filter((v): v is string => typeof v === "string")
    .flatMap((v) => v.split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

/** "me/echo:1.2" → "echo"; "registry:5000/team/app@sha256:…" → "app". */
export function nameFromImage(image: string): string {
  const last = image.split("/").pop() ?? image;
  return last.split("@")[0]!.split(":")[0]!;
}

/** Why an image reference may not be what runs tomorrow: no tag, or `:latest` (a digest pins it). */
export function imageWarning(image: string): string | undefined {
  if (image.includes("@")) return undefined;
  const last = image.split("/").pop() ?? image;
  const colon = last.lastIndexOf(":");
  if (colon === -1)
    return `image ${image} has no tag: workers pull whatever :latest is when they start; push a version tag (me/app:1.2) or pin a digest`;
  if (last.slice(colon + 1) === "latest")
    return `image ${image} is :latest: workers started later may run a different build; push a version tag or pin a digest`;
  return undefined;
}

/** `--cpu cpu5c:4,cpu5g:8` → `[{id: "cpu5c", vcpuCount: 4}, {id: "cpu5g", vcpuCount: 8}]`. */
export function parseCpu(raw: unknown): EndpointCpu[] {
  return list(raw).map((entry) => {
    const [id, count, ...rest] = entry.split(":");
    const vcpuCount = Number(count);
    if (id === undefined || id === "" || rest.length > 0 || !Number.isInteger(vcpuCount) || vcpuCount < 2)
      throw usageError(
        `--cpu expects FLAVOUR:VCPUS entries such as cpu5c:4 (vCPUs an integer ≥ 2), got ${JSON.stringify(entry)}`,
      );
    return { id, vcpuCount };
  });
}

/**
 * Reads `executionTimeoutMs` and, for a fixed `concurrency`, the requests a worker runs at once
 * from a handler module's default export: `concurrency`, times `batch.maxSize` for a batch
 * handler (its `concurrency` counts batches; docs/load-balancing.md, "Limits and what the worker
 * promises").
 */
export async function handlerDefaults(
  path: string,
): Promise<{ executionTimeoutMs: number; requestsAtOnce: number | undefined }> {
  let module: { default?: unknown };
  try {
    await allowTypeScript(path);
    module = (await import(pathToFileURL(resolve(path)).href)) as { default?: unknown };
  } catch (err) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      `could not load ${path}: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  if (!isHandlerDefinition(module.default)) {
    throw new RunletError("RUNLET_HANDLER_LOAD", `${path} has no \`export default defineHandler({...})\``);
  }
  const definition = module.default;
  const { executionTimeoutMs, concurrency } = definition;
  if (typeof concurrency !== "number") return { executionTimeoutMs, requestsAtOnce: undefined };
  const perBatch = isBatchDefinition(definition) ? definition.batch.maxSize : 1;
  return { executionTimeoutMs, requestsAtOnce: concurrency * perBatch };
}

/** What `--gpu` named, before the catalog is read: pools as they are, GPU type ids to resolve. */
export interface GpuRequest {
  readonly pools: string[];
  readonly types: string[];
}

/** Splits `--gpu` into pool ids and GPU type ids. */
export function gpuRequestOf(raw: unknown): GpuRequest | undefined {
  const entries = list(raw);
  if (entries.length === 0) return undefined;
  return { pools: entries.filter((e) => POOL_ID.test(e)), types: entries.filter((e) => !POOL_ID.test(e)) };
}

/**
 * Resolves GPU type ids into their serverless pools plus `excludedTypes` (every other type of
 * those pools), from the catalog (`GET /v2/catalog/gpus`). Answers the pools and exclusions and a
 * line saying what was resolved.
 */
export function resolveGpuTypes(
  request: GpuRequest,
  catalog: readonly GpuType[],
): { pools: string[]; excludedTypes: string[]; note: string | undefined } {
  if (request.types.length === 0) return { pools: request.pools, excludedTypes: [], note: undefined };
  const chosen = request.types.map((id) => {
    const found = catalog.find((g) => g.id === id || g.name === id);
    if (found === undefined)
      throw usageError(
        `--gpu ${JSON.stringify(id)} is neither a pool id (such as ADA_24) nor a GPU type of the catalog (GET /v2/catalog/gpus)`,
      );
    if (found.pool === null)
      throw usageError(`--gpu ${JSON.stringify(id)}: the GPU type ${found.id} is in no serverless pool`);
    return found;
  });
  const typePools = [...new Set(chosen.map((g) => g.pool as string))];
  const keep = new Set(chosen.map((g) => g.id));
  // Whole pools named beside types stay whole: exclusions only narrow the pools a type brought in.
  const excludedTypes = catalog
    .filter((g) => g.pool !== null && typePools.includes(g.pool) && !request.pools.includes(g.pool))
    .filter((g) => !keep.has(g.id))
    .map((g) => g.id);
  const pools = [...new Set([...request.pools, ...typePools])];
  const note = `gpu: ${chosen.map((g) => g.id).join(", ")} → pool ${typePools.join(", ")}${
    excludedTypes.length > 0 ? `, excluding ${excludedTypes.join(", ")}` : ""
  }`;
  return { pools, excludedTypes, note };
}

/** `--scaler` in either spelling. */
function scalerType(raw: string | undefined): "QUEUE_DELAY" | "REQUEST_COUNT" | undefined {
  if (raw === undefined) return undefined;
  const normal = raw.toUpperCase().replaceAll("-", "_");
  if (normal === "QUEUE_DELAY" || normal === "REQUEST_COUNT") return normal;
  throw usageError(`--scaler must be queue-delay or request-count, got ${JSON.stringify(raw)}`);
}

/** Turns parsed flags into a deploy spec (GPU types still unresolved), refusing contradictions with a usage error. */
export async function specOf(
  values: Record<string, unknown>,
  handlerPath: string | undefined,
): Promise<{ spec: DeploySpec; gpu: GpuRequest | undefined }> {
  const image = str(values["image"]);
  if (image === undefined || image === "")
    throw usageError("--image is required (the container image to deploy)");
  const typeFlag = str(values["type"]) ?? "queue";
  if (typeFlag !== "queue" && typeFlag !== "lb")
    throw usageError(`--type must be queue or lb, got ${JSON.stringify(typeFlag)}`);
  const type = typeFlag === "lb" ? "LOAD_BALANCER" : "QUEUE";
  const gpu = gpuRequestOf(values["gpu"]);
  const cpu = values["cpu"] === undefined ? undefined : parseCpu(values["cpu"]);
  if (gpu !== undefined && cpu !== undefined) throw usageError("give --gpu or --cpu, not both");
  const gpuCount = int("gpu-count", values["gpu-count"], 1);
  const cuda = list(values["cuda"]);
  const minCuda = str(values["min-cuda"]);
  for (const [flag, given] of [
    ["gpu-count", gpuCount],
    ["cuda", cuda.length > 0 ? cuda : undefined],
    ["min-cuda", minCuda],
  ] as const)
    if (given !== undefined && gpu === undefined) throw usageError(`--${flag} needs --gpu`);
  if (cuda.length > 0 && minCuda !== undefined)
    throw usageError("give --cuda (an exact set) or --min-cuda (a floor), not both");
  const env: Record<string, string> = {};
  for (const pair of (values["env"] as string[] | undefined) ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw usageError(`--env expects KEY=VALUE, got ${JSON.stringify(pair)}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  let ports: string[] | undefined;
  if (type === "LOAD_BALANCER") {
    const flagPort = int("port", values["port"], 1, 65_535);
    const envPort =
      env["PORT"] === undefined ? undefined : integerFlag("env PORT", env["PORT"], 0, 1, 65_535);
    if (flagPort !== undefined && envPort !== undefined && flagPort !== envPort)
      throw usageError(`--port ${flagPort} and --env PORT=${envPort} disagree: give one`);
    const port = flagPort ?? envPort ?? DEFAULT_LB_PORT;
    env["PORT"] = String(port);
    ports = [`${port}/http`];
  } else if (values["port"] !== undefined) {
    throw usageError("--port is for --type lb (the port the worker's HTTP server listens on)");
  }
  const defaults = handlerPath === undefined ? undefined : await handlerDefaults(handlerPath);
  const scaler = scalerType(str(values["scaler"]));
  const rawValue = str(values["scaler-value"]);
  let scaling: Scaling | undefined;
  const atOnce = defaults?.requestsAtOnce;
  if (scaler === undefined && rawValue !== undefined)
    throw usageError("--scaler-value needs --scaler queue-delay|request-count");
  if (scaler === "QUEUE_DELAY") {
    const queueDelay = rawValue === undefined ? 4 : Number(rawValue);
    if (!Number.isFinite(queueDelay) || queueDelay < 0.5)
      throw usageError(`--scaler-value of queue-delay is seconds ≥ 0.5, got ${JSON.stringify(rawValue)}`);
    scaling = { type: "QUEUE_DELAY", queueDelay };
  } else if (scaler === "REQUEST_COUNT") {
    scaling = { type: "REQUEST_COUNT", requestCount: int("scaler-value", rawValue, 1) ?? atOnce ?? 1 };
  } else if (type === "LOAD_BALANCER" || (atOnce !== undefined && atOnce > 1)) {
    // A worker runs `concurrency` requests at once (× maxSize for a batch handler): scale by
    // requests per worker to match.
    scaling = { type: "REQUEST_COUNT", requestCount: atOnce ?? 1 };
  }
  if (type === "LOAD_BALANCER" && scaling?.type === "QUEUE_DELAY")
    throw usageError("--type lb scales on request-count (there is no queue to delay)");
  const idleTimeout = int("idle-timeout", values["idle-timeout"], 1, 3600);
  if (idleTimeout !== undefined && type === "QUEUE" && scaling?.type === "REQUEST_COUNT")
    throw usageError("--idle-timeout does not apply to a queue endpoint scaling on request-count");
  const min = int("workers-min", values["workers-min"], 0);
  const max = int("workers-max", values["workers-max"], 0);
  const workers = Object.fromEntries(
    Object.entries({ min, max, idleTimeout }).filter(([, v]) => v !== undefined),
  ) as DeploySpec["workers"];
  const executionTimeoutMs =
    int("execution-timeout-ms", values["execution-timeout-ms"], 1) ?? defaults?.executionTimeoutMs;
  const networkVolumes = list(values["network-volume"]);
  const dataCenterIds = list(values["data-center"]);
  const gpuSpec: EndpointGpuCreate | undefined =
    gpu === undefined
      ? undefined
      : {
          pools: gpu.pools,
          ...(gpuCount === undefined ? {} : { count: gpuCount }),
          ...(cuda.length > 0 ? { allowedCudaVersions: cuda } : {}),
          ...(minCuda === undefined ? {} : { minCudaVersion: minCuda }),
        };
  const spec: Record<string, unknown> = {
    name: str(values["name"]) ?? nameFromImage(image),
    image,
    type,
    templateId: str(values["template-id"]),
    endpointId: str(values["endpoint-id"]),
    diskGb: int("disk", values["disk"], 1),
    env: Object.keys(env).length > 0 ? env : undefined,
    ports,
    registryId: str(values["registry"]),
    gpu: gpuSpec,
    cpu,
    workers: Object.keys(workers ?? {}).length > 0 ? workers : undefined,
    scaling,
    executionTimeoutMs,
    flashboot: values["flashboot"] === true ? "FLASHBOOT" : undefined,
    networkVolumes: networkVolumes.length > 0 ? networkVolumes : undefined,
    dataCenterIds: dataCenterIds.length > 0 ? dataCenterIds : undefined,
  };
  return {
    spec: Object.fromEntries(
      Object.entries(spec).filter(([, v]) => v !== undefined),
    ) as unknown as DeploySpec,
    gpu,
  };
}
