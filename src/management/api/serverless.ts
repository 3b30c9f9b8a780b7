import {
  type Endpoint,
  type EndpointReleases,
  type EndpointWorkers,
  endpointReleasesSchema,
  endpointSchema,
  endpointWorkersSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  serverlessCreateSchema,
  serverlessUpdateSchema,
} from "../../protocol/management/serverless.js";
import { validateResponse } from "../validate.js";
import { type Call, type ListOptions, pathId, withSignal } from "./call.js";
import { type CrudApi, crudApi } from "./resource.js";

/**
 * `/v2/serverless`: endpoint CRUD (`create` takes `name`, `type`, `scaling`, one of `gpu` or `cpu`,
 * and `image` or `templateId`), workers, worker logs and releases.
 */
export interface ServerlessApi extends CrudApi<Endpoint, ServerlessCreateInput, ServerlessUpdateInput> {
  /** `GET /v2/serverless/{id}/workers`: the active workers and a count per status. */
  workers(id: string, options?: ListOptions): Promise<EndpointWorkers>;
  /** `GET /v2/serverless/{id}/workers/{workerId}/logs`. */
  workerLogs(id: string, workerId: string, options?: ListOptions): Promise<unknown>;
  /** `GET /v2/serverless/{id}/releases`: the release history, newest first, and how far the rollout is. */
  releases(id: string, options?: ListOptions): Promise<EndpointReleases>;
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
      const answer = await call({
        method: "GET",
        path: `/serverless/${pathId(id)}/workers`,
        query: options?.query,
        ...withSignal(options),
      });
      return validateResponse(endpointWorkersSchema, answer, "GET /v2/serverless/{id}/workers");
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
      const answer = await call({
        method: "GET",
        path: `/serverless/${pathId(id)}/releases`,
        query: options?.query,
        ...withSignal(options),
      });
      return validateResponse(endpointReleasesSchema, answer, "GET /v2/serverless/{id}/releases");
    },
  };
}
