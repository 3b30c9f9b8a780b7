import { z } from "zod";
import {
  type CpuType,
  cpuTypeSchema,
  type DataCenter,
  dataCenterSchema,
  type GpuType,
  gpuTypeSchema,
} from "../../protocol/management/catalog.js";
import { validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";
import { crudApi } from "./resource.js";

/**
 * The v2-only read groups: Instant Clusters (`/v2/clusters`), the catalog (`/v2/catalog/...`)
 * and billing histories (`/v2/billing/...`). Catalog answers are checked and unwrapped; clusters
 * and billing come back as parsed JSON, untyped.
 */

/** `/v2/clusters`. */
export interface ClustersApi {
  list(options?: ListOptions): Promise<unknown>;
  get(id: string, options?: CallOptions): Promise<unknown>;
  create(body: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  update(id: string, body: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** `GET /v2/catalog/...`: GPU types (with their serverless `pool`), CPU flavours, data centers. */
export interface CatalogApi {
  /** `GET /v2/catalog/gpus`, unwrapped from `{gpus: [...]}`; `query` filters (`product=SERVERLESS`, ...). */
  gpus(options?: ListOptions): Promise<GpuType[]>;
  gpu(id: string, options?: CallOptions): Promise<GpuType>;
  /** `GET /v2/catalog/cpus`, unwrapped from `{cpus: [...]}`. */
  cpus(options?: ListOptions): Promise<CpuType[]>;
  cpu(id: string, options?: CallOptions): Promise<CpuType>;
  /** `GET /v2/catalog/datacenters`, unwrapped from `{dataCenters: [...]}`. */
  datacenters(options?: ListOptions): Promise<DataCenter[]>;
  datacenter(id: string, options?: CallOptions): Promise<DataCenter>;
}

/** `GET /v2/billing...`: billing histories. `endpoints` is public-endpoint billing, not Serverless. */
export interface BillingApi {
  /** `GET /v2/billing`: aggregated over every resource. */
  aggregated(options?: ListOptions): Promise<unknown>;
  pods(options?: ListOptions): Promise<unknown>;
  serverless(options?: ListOptions): Promise<unknown>;
  networkVolumes(options?: ListOptions): Promise<unknown>;
  /** `GET /v2/billing/endpoints`: public endpoint billing (a different resource from v1's). */
  publicEndpoints(options?: ListOptions): Promise<unknown>;
  /** `GET /v2/billing/clusters`: Instant Clusters billing (path inferred from the other histories). */
  clusters(options?: ListOptions): Promise<unknown>;
}

const objectBody = z.record(z.string(), z.unknown(), { error: "body must be a JSON object" });

/** Instant Clusters, described once: their answers' shapes are not shown in the spec, so none is checked. */
export const CLUSTERS = {
  path: "/clusters",
  item: z.unknown(),
  name: "cluster",
  create: objectBody,
  update: objectBody,
} as const;

export function clustersApi(call: Call): ClustersApi {
  return crudApi(call, CLUSTERS);
}

export function catalogApi(call: Call): CatalogApi {
  const list =
    <S extends z.ZodType>(kind: string, key: string, item: S) =>
    async (options?: ListOptions): Promise<z.output<S>[]> =>
      unwrapList(
        await call({
          method: "GET",
          path: `/catalog/${kind}`,
          query: options?.query,
          ...withSignal(options),
        }),
        key,
        item,
        `GET /v2/catalog/${kind}`,
      );
  const one =
    <S extends z.ZodType>(kind: string, item: S) =>
    async (id: string, options?: CallOptions): Promise<z.output<S>> =>
      validateResponse(
        item,
        await call({ method: "GET", path: `/catalog/${kind}/${pathId(id)}`, ...withSignal(options) }),
        `GET /v2/catalog/${kind}/{id}`,
      );
  return {
    gpus: list("gpus", "gpus", gpuTypeSchema),
    gpu: one("gpus", gpuTypeSchema),
    cpus: list("cpus", "cpus", cpuTypeSchema),
    cpu: one("cpus", cpuTypeSchema),
    datacenters: list("datacenters", "dataCenters", dataCenterSchema),
    datacenter: one("datacenters", dataCenterSchema),
  };
}

export function billingApi(call: Call): BillingApi {
  const history = (suffix: string) => (options?: ListOptions) =>
    call({ method: "GET", path: `/billing${suffix}`, query: options?.query, ...withSignal(options) });
  return {
    aggregated: history(""),
    pods: history("/pods"),
    serverless: history("/serverless"),
    networkVolumes: history("/network-volumes"),
    publicEndpoints: history("/endpoints"),
    clusters: history("/clusters"),
  };
}
