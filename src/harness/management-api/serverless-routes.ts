import {
  issueMessages,
  serverlessCreateSchema,
  serverlessUpdateSchema,
} from "../../protocol/management/index.js";
import { json, type ManagementAnswer, noContent, problem } from "./answers.js";
import type { CrudResource, EndpointEvent, RouteContext } from "./route-context.js";
import { randomId, type StoredEndpoint } from "./store.js";

/** Worker counts of an endpoint created without `workers` (the platform's defaults are not shown). */
export const DEFAULT_WORKERS = Object.freeze({ min: 0, max: 3 });

/** Callbacks fired after a change is stored. */
export interface EndpointHooks {
  created(event: EndpointEvent): void;
  updated(event: EndpointEvent): void;
  deleted(endpointId: string): void;
}

/** `/v2/serverless` and `/v2/serverless/{id}`: list, create, get, PATCH, delete. */
export function serverlessResource(context: RouteContext, hooks: EndpointHooks): CrudResource {
  const { store } = context;
  const notFound = (id: string) => problem(404, `endpoint ${id} not found`);
  const eventOf = (endpoint: StoredEndpoint): EndpointEvent => ({
    endpoint,
    template: endpoint.templateId === undefined ? undefined : store.template(endpoint.templateId)?.template,
  });
  /** A template an endpoint may use: the caller's, or a public one. */
  const templateProblem = (templateId: string | undefined): ManagementAnswer | undefined => {
    if (templateId === undefined) return undefined;
    const t = store.template(templateId);
    if (t !== undefined && (t.owner === "self" || t.template.isPublic === true)) return undefined;
    return problem(400, "the endpoint is invalid", [`templateId: no template ${templateId}`]);
  };

  return {
    name: "serverless",
    list: () => json(200, { endpoints: store.endpoints() }),
    create(body) {
      const parsed = serverlessCreateSchema.safeParse(body);
      if (!parsed.success) return problem(400, "the endpoint is invalid", issueMessages(parsed.error));
      const bad = templateProblem(parsed.data.templateId);
      if (bad !== undefined) return bad;
      const id = randomId(14);
      const template =
        parsed.data.templateId === undefined ? undefined : store.template(parsed.data.templateId);
      const endpoint: StoredEndpoint = {
        ...parsed.data,
        id,
        name: parsed.data.name ?? template?.template.name ?? id,
        workers: { ...DEFAULT_WORKERS, ...parsed.data.workers },
        createdAt: new Date(context.clock()).toISOString(),
      };
      store.putEndpoint(endpoint);
      hooks.created(eventOf(endpoint));
      return json(201, endpoint);
    },
    get(id) {
      const current = store.endpoint(id);
      return current === undefined ? notFound(id) : json(200, current);
    },
    remove(id) {
      if (store.endpoint(id) === undefined) return notFound(id);
      store.deleteEndpoint(id);
      hooks.deleted(id);
      return noContent();
    },
    update(id, body) {
      const current = store.endpoint(id);
      if (current === undefined) return notFound(id);
      const parsed = serverlessUpdateSchema.safeParse(body);
      if (!parsed.success) return problem(400, "the endpoint update is invalid", issueMessages(parsed.error));
      const bad = templateProblem(parsed.data.templateId);
      if (bad !== undefined) return bad;
      const { gpu, cpu, workers, ...others } = parsed.data;
      const next: Record<string, unknown> = { ...current, ...others };
      // Switching compute kind replaces the other one: an endpoint has a gpu or a cpu, never both.
      if (gpu !== undefined) {
        next["gpu"] = gpu;
        delete next["cpu"];
      }
      if (cpu !== undefined) {
        next["cpu"] = cpu;
        delete next["gpu"];
      }
      const mergedWorkers = { ...current.workers, ...workers };
      if (
        mergedWorkers.min !== undefined &&
        mergedWorkers.max !== undefined &&
        mergedWorkers.min > mergedWorkers.max
      ) {
        return problem(400, "the endpoint update is invalid", [
          `workers.max: workers.min (${mergedWorkers.min}) must be ≤ workers.max (${mergedWorkers.max})`,
        ]);
      }
      next["workers"] = mergedWorkers;
      const updated = next as StoredEndpoint;
      store.putEndpoint(updated);
      hooks.updated(eventOf(updated));
      return json(200, updated);
    },
    below(id, rest) {
      if (store.endpoint(id) === undefined) return notFound(id);
      const sub = rest.split("/")[0];
      return sub === "workers" || sub === "releases"
        ? problem(501, `the harness does not emulate /v2/serverless/{id}/${rest}`)
        : problem(404, `no such path /v2/serverless/${id}/${rest}`);
    },
  };
}
