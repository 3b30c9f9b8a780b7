import {
  type Pod,
  type PodAction,
  type PodCreateInput,
  type PodUpdateInput,
  podActionSchema,
  podCreateSchema,
  podSchema,
  podUpdateSchema,
} from "../../protocol/management/pod.js";
import { validateBody } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, withSignal } from "./call.js";
import { type CrudApi, crudApi } from "./resource.js";

/**
 * `/v2/pods`: CRUD (`create` takes exactly one of `gpu` or `cpu`, `cloud` defaults to SECURE;
 * `update` is v1's `POST /pods/{podId}/update`), lifecycle actions and logs.
 */
export interface PodsApi extends CrudApi<Pod, PodCreateInput, PodUpdateInput> {
  /** `POST /v2/pods/{id}/action` with `{action}`: start, stop, restart or terminate. */
  action(id: string, action: PodAction, options?: CallOptions): Promise<unknown>;
  /** `GET /v2/pods/{id}/logs` (JSON, or text when the answer is not JSON). */
  logs(id: string, options?: ListOptions): Promise<unknown>;
}

/** The pods resource, described once. */
export const PODS = {
  path: "/pods",
  listKey: "pods",
  item: podSchema,
  name: "pod",
  create: podCreateSchema,
  update: podUpdateSchema,
} as const;

export function podsApi(call: Call): PodsApi {
  return {
    ...crudApi(call, PODS),
    async action(id, action, options) {
      const checked = validateBody(podActionSchema, action, "pod action");
      return call({
        method: "POST",
        path: `/pods/${pathId(id)}/action`,
        body: { action: checked },
        ...withSignal(options),
      });
    },
    async logs(id, options) {
      return call({
        method: "GET",
        path: `/pods/${pathId(id)}/logs`,
        query: options?.query,
        ...withSignal(options),
      });
    },
  };
}
