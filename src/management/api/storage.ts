import { z } from "zod";
import {
  type NetworkVolume,
  type NetworkVolumeCreateInput,
  type NetworkVolumeUpdateInput,
  networkVolumeCreateSchema,
  networkVolumeSchema,
  networkVolumeUpdateSchema,
} from "../../protocol/management/network-volume.js";
import { validateBody, validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";

/** `/v2/network-volumes`. */
export interface NetworkVolumesApi {
  /** `GET /v2/network-volumes`, unwrapped from `{networkVolumes: [...]}`. */
  list(options?: ListOptions): Promise<NetworkVolume[]>;
  get(id: string, options?: CallOptions): Promise<NetworkVolume>;
  /** `POST /v2/network-volumes`: `name`, `dataCenter`; optional `size` (GB) and `type`. */
  create(body: NetworkVolumeCreateInput, options?: CallOptions): Promise<NetworkVolume>;
  /** `PATCH /v2/network-volumes/{id}`. */
  update(id: string, body: NetworkVolumeUpdateInput, options?: CallOptions): Promise<NetworkVolume>;
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** A container registry auth as v2 answers it (its fields are not shown in the spec). */
export const registrySchema = z.looseObject({ id: z.string() });
export type Registry = z.infer<typeof registrySchema>;

/** `/v2/registries` (v1's `/containerregistryauth`) and its delegations. */
export interface RegistriesApi {
  /** `GET /v2/registries`, unwrapped from `{registries: [...]}`. */
  list(options?: ListOptions): Promise<Registry[]>;
  get(id: string, options?: CallOptions): Promise<Registry>;
  /** `POST /v2/registries` (body fields not shown in the spec: passed through). */
  create(body: Record<string, unknown>, options?: CallOptions): Promise<Registry>;
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
  const base = "/network-volumes";
  return {
    async list(options) {
      const answer = await call({ method: "GET", path: base, query: options?.query, ...withSignal(options) });
      return unwrapList(answer, "networkVolumes", networkVolumeSchema, `GET /v2${base}`);
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: `${base}/${pathId(id)}`, ...withSignal(options) });
      return validateResponse(networkVolumeSchema, answer, `GET /v2${base}/{id}`);
    },
    async create(body, options) {
      const checked = validateBody(networkVolumeCreateSchema, body, "network volume");
      const answer = await call({ method: "POST", path: base, body: checked, ...withSignal(options) });
      return validateResponse(networkVolumeSchema, answer, `POST /v2${base}`);
    },
    async update(id, body, options) {
      const checked = validateBody(networkVolumeUpdateSchema, body, "network volume update");
      const answer = await call({
        method: "PATCH",
        path: `${base}/${pathId(id)}`,
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(networkVolumeSchema, answer, `PATCH /v2${base}/{id}`);
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: `${base}/${pathId(id)}`, ...withSignal(options) });
    },
  };
}

export function registriesApi(call: Call): RegistriesApi {
  return {
    async list(options) {
      const answer = await call({
        method: "GET",
        path: "/registries",
        query: options?.query,
        ...withSignal(options),
      });
      return unwrapList(answer, "registries", registrySchema, "GET /v2/registries");
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: `/registries/${pathId(id)}`, ...withSignal(options) });
      return validateResponse(registrySchema, answer, "GET /v2/registries/{id}");
    },
    async create(body, options) {
      const checked = validateBody(objectBody, body, "registry");
      const answer = await call({
        method: "POST",
        path: "/registries",
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(registrySchema, answer, "POST /v2/registries");
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: `/registries/${pathId(id)}`, ...withSignal(options) });
    },
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
