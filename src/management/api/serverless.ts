import {
  type Endpoint,
  endpointSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  serverlessCreateSchema,
  serverlessUpdateSchema,
} from "../../protocol/management/serverless.js";
import { validateBody, validateResponse } from "../validate.js";
import { type Call, type CallOptions, type ListOptions, pathId, unwrapList, withSignal } from "./call.js";

/** `/v2/serverless`: endpoint CRUD, in-place update, workers, worker logs and releases. */
export interface ServerlessApi {
  /** `GET /v2/serverless`, unwrapped from `{endpoints: [...]}`. */
  list(options?: ListOptions): Promise<Endpoint[]>;
  /** `GET /v2/serverless/{id}`. */
  get(id: string, options?: CallOptions): Promise<Endpoint>;
  /** `POST /v2/serverless`: `templateId`, or `name` + `image` + `gpu` (or `cpu`); `workers`, `scaling`. */
  create(body: ServerlessCreateInput, options?: CallOptions): Promise<Endpoint>;
  /** `PATCH /v2/serverless/{id}` (v1's `POST /endpoints/{id}/update`). */
  update(id: string, body: ServerlessUpdateInput, options?: CallOptions): Promise<Endpoint>;
  /** `DELETE /v2/serverless/{id}`. */
  delete(id: string, options?: CallOptions): Promise<void>;
  /** `GET /v2/serverless/{id}/workers`. */
  workers(id: string, options?: ListOptions): Promise<unknown>;
  /** `GET /v2/serverless/{id}/workers/{workerId}/logs`. */
  workerLogs(id: string, workerId: string, options?: ListOptions): Promise<unknown>;
  /** `GET /v2/serverless/{id}/releases`. */
  releases(id: string, options?: ListOptions): Promise<unknown>;
}

export function serverlessApi(call: Call): ServerlessApi {
  return {
    async list(options) {
      const answer = await call({
        method: "GET",
        path: "/serverless",
        query: options?.query,
        ...withSignal(options),
      });
      return unwrapList(answer, "endpoints", endpointSchema, "GET /v2/serverless");
    },
    async get(id, options) {
      const answer = await call({ method: "GET", path: `/serverless/${pathId(id)}`, ...withSignal(options) });
      return validateResponse(endpointSchema, answer, "GET /v2/serverless/{id}");
    },
    async create(body, options) {
      const checked = validateBody(serverlessCreateSchema, body, "serverless endpoint");
      const answer = await call({
        method: "POST",
        path: "/serverless",
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(endpointSchema, answer, "POST /v2/serverless");
    },
    async update(id, body, options) {
      const checked = validateBody(serverlessUpdateSchema, body, "serverless endpoint update");
      const answer = await call({
        method: "PATCH",
        path: `/serverless/${pathId(id)}`,
        body: checked,
        ...withSignal(options),
      });
      return validateResponse(endpointSchema, answer, "PATCH /v2/serverless/{id}");
    },
    async delete(id, options) {
      await call({ method: "DELETE", path: `/serverless/${pathId(id)}`, ...withSignal(options) });
    },
    async workers(id, options) {
      return call({
        method: "GET",
        path: `/serverless/${pathId(id)}/workers`,
        query: options?.query,
        ...withSignal(options),
      });
    },
    async workerLogs(id, workerId, options) {
      return call({
        method: "GET",
        path: `/serverless/${pathId(id)}/workers/${pathId(workerId, "workerId")}/logs`,
        query: options?.query,
        ...withSignal(options),
      });
    },
    async releases(id, options) {
      return call({
        method: "GET",
        path: `/serverless/${pathId(id)}/releases`,
        query: options?.query,
        ...withSignal(options),
      });
    },
  };
}
