import { z } from "zod";
import {
  type NetworkVolume,
  type NetworkVolumeCreateInput,
  type NetworkVolumeUpdateInput,
  networkVolumeCreateSchema,
  networkVolumeSchema,
  networkVolumeUpdateSchema,
} from "../../protocol/management/network-volume.js";
import {
  type Registry,
  type RegistryCreateInput,
  registryCreateSchema,
  registrySchema,
} from "../../protocol/management/registry.js";
import { validateBody } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, withSignal } from "./call.js";
import { type CrudApi, crudApi } from "./resource.js";

/** `/v2/network-volumes`: `create` takes `name`, `dataCenter`, `size` (GB, 10-4096) and optionally `type`. */
export interface NetworkVolumesApi
  extends CrudApi<NetworkVolume, NetworkVolumeCreateInput, NetworkVolumeUpdateInput> {}

/** The network volumes resource, described once. */
export const NETWORK_VOLUMES = {
  path: "/network-volumes",
  listKey: "networkVolumes",
  item: networkVolumeSchema,
  name: "network volume",
  create: networkVolumeCreateSchema,
  update: networkVolumeUpdateSchema,
} as const;

/** `/v2/registries` (v1's `/containerregistryauth`) and its delegations. */
export interface RegistriesApi {
  /** `GET /v2/registries`, unwrapped from `{registries: [...]}`. */
  list(options?: ListOptions): Promise<Registry[]>;
  get(id: string, options?: CallOptions): Promise<Registry>;
  /** `POST /v2/registries`: `{name, username, password}`; the answer's `id` is what a template's `registry` takes. */
  create(body: RegistryCreateInput, options?: CallOptions): Promise<Registry>;
  delete(id: string, options?: CallOptions): Promise<void>;
  /** `GET /v2/registries/delegations`. */
  listDelegations(options?: ListOptions): Promise<unknown>;
  /** `POST /v2/registries/delegations`. */
  createDelegation(body: Record<string, unknown>, options?: CallOptions): Promise<unknown>;
  /** `DELETE /v2/registries/delegations/{id}`. */
  deleteDelegation(id: string, options?: CallOptions): Promise<void>;
}

const objectBody = z.record(z.string(), z.unknown(), { error: "body must be a JSON object" });

export function networkVolumesApi(call: Call): NetworkVolumesApi {
  return crudApi(call, NETWORK_VOLUMES);
}

/** The registries resource, described once (it has no update). */
export const REGISTRIES = {
  path: "/registries",
  listKey: "registries",
  item: registrySchema,
  name: "registry",
  create: registryCreateSchema,
  update: objectBody,
} as const;

export function registriesApi(call: Call): RegistriesApi {
  const { list, get, create, delete: remove } = crudApi(call, REGISTRIES);
  return {
    list,
    get,
    create,
    delete: remove,
    async listDelegations(options) {
      return call({
        method: "GET",
        path: "/registries/delegations",
        query: options?.query,
        ...withSignal(options),
      });
    },
    async createDelegation(body, options) {
      const checked = validateBody(objectBody, body, "registry delegation");
      return call({ method: "POST", path: "/registries/delegations", body: checked, ...withSignal(options) });
    },
    async deleteDelegation(id, options) {
      await call({ method: "DELETE", path: `/registries/delegations/${pathId(id)}`, ...withSignal(options) });
    },
  };
}
