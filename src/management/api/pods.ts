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
import { validateBody, validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";

/** `/v2/pods`: CRUD, lifecycle actions and logs. */
export interface PodsApi {
  /** `GET /v2/pods`, unwrapped from `{pods: [...]}`. */
  list(options?: ListOptions): Promise<Pod[]>;
  /** `GET /v2/pods/{id}`. */
  get(id: string, options?: CallOptions): Promise<Pod>;
  /** `POST /v2/pods`: exactly one of `gpu` or `cpu`; `cloud` defaults to SECURE. */
  create(body: PodCreateInput, options?: CallOptions): Promise<Pod>;
  /** `PATCH /v2/pods/{id}` (v1's `POST /pods/{podId}/update`). */
  update(id: string, body: PodUpdateInput, options?: CallOptions): Promise<Pod>;
  /** `DELETE /v2/pods/{id}`. */
  delete(id: string, options?: CallOptions): Promise<void>;
  /** `POST /v2/pods/{id}/action` with `{action}`: start, stop, restart or terminate. */
  action(id: string, action: PodAction, options?: CallOptions): Promise<unknown>;
  /** `GET /v2/pods/{id}/logs` (JSON, or text when the answer is not JSON). */
  logs(id: string, options?: ListOptions): Promise<unknown>;
}

export function podsApi(call: Call): PodsApi {
  return {
    async list(options) {
      const answer = await call({
        method: "GET",
        path: "/pods",
        query: options?.query,
        ...withSignal(options),
      });
      return unwrapList(answer, "pods", podSchema, "GET /v2/pods");
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: `/pods/${pathId(id)}`, ...withSignal(options) });
      return validateResponse(podSchema, answer, "GET /v2/pods/{id}");
    },
    async create(body, options) {
      const checked = validateBody(podCreateSchema, body, "pod");
      const answer = await call({ method: "POST", path: "/pods", body: checked, ...withSignal(options) });
      return validateResponse(podSchema, answer, "POST /v2/pods");
    },
    async update(id, body, options) {
      const checked = validateBody(podUpdateSchema, body, "pod update");
      const answer = await call({
        method: "PATCH",
        path: `/pods/${pathId(id)}`,
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(podSchema, answer, "PATCH /v2/pods/{id}");
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: `/pods/${pathId(id)}`, ...withSignal(options) });
    },
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
