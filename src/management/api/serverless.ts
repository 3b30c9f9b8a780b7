import {
  type Endpoint,
  endpointSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  serverlessCreateSchema,
  serverlessUpdateSchema,
} from "../../protocol/management/serverless.js";
import { type Call, type ListOptions, pathId, withSignal } from "./call.js";
import { type CrudApi, crudApi } from "./resource.js";

/**
 * `/v2/serverless`: endpoint CRUD (`create` takes `templateId`, or `name` + `image` + `gpu` (or
 * `cpu`), and `workers`, `scaling`; `update` is v1's `POST /endpoints/{id}/update`), workers,
 * worker logs and releases.
 */
export interface ServerlessApi extends CrudApi<Endpoint, ServerlessCreateInput, ServerlessUpdateInput> {
  /** `GET /v2/serverless/{id}/workers`. */
  workers(id: string, options?: ListOptions): Promise<unknown>;
  /** `GET /v2/serverless/{id}/workers/{workerId}/logs`. */
  workerLogs(id: string, workerId: string, options?: ListOptions): Promise<unknown>;
  /** `GET /v2/serverless/{id}/releases`. */
  releases(id: string, options?: ListOptions): Promise<unknown>;
}

/** The serverless endpoints resource, described once. */
export const SERVERLESS = {
  path: "/serverless",
  listKey: "endpoints",
  item: endpointSchema,
  name: "serverless endpoint",
  create: serverlessCreateSchema,
  update: serverlessUpdateSchema,
} as const;

export function serverlessApi(call: Call): ServerlessApi {
  return {
    ...crudApi(call, SERVERLESS),
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
