import { z } from "zod";
import { type Call, type CallOptions, type ListOptions, pathId, withSignal } from "./call.js";
import { crudApi } from "./resource.js";

/**
 * The v2-only read groups: Instant Clusters (`/v2/clusters`), the catalog (`/v2/catalog/...`)
 * and billing histories (`/v2/billing/...`). Their answer shapes are not shown in the spec, so
 * they come back as parsed JSON, untyped.
 */

/** `/v2/clusters`. */
export interface ClustersApi {
  list(options?: ListOptions): Promise<unknown>;
  get(id: string, options?: CallOptions): Promise<unknown>;
  create(body: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  update(id: string, body: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** `GET /v2/catalog/...`: GPU types, CPU flavours, data centers. */
export interface CatalogApi {
  gpus(options?: ListOptions): Promise<unknown>;
  gpu(id: string, options?: CallOptions): Promise<unknown>;
  cpus(options?: ListOptions): Promise<unknown>;
  cpu(id: string, options?: CallOptions): Promise<unknown>;
  datacenters(options?: ListOptions): Promise<unknown>;
  datacenter(id: string, options?: CallOptions): Promise<unknown>;
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
  const list = (kind: string) => (options?: ListOptions) =>
    call({ method: "GET", path: `/catalog/${kind}`, query: options?.query, ...withSignal(options) });
  const one = (kind: string) => (id: string, options?: CallOptions) =>
    call({ method: "GET", path: `/catalog/${kind}/${pathId(id)}`, ...withSignal(options) });
  return {
    gpus: list("gpus"),
    gpu: one("gpus"),
    cpus: list("cpus"),
    cpu: one("cpus"),
    datacenters: list("datacenters"),
    datacenter: one("datacenters"),
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
