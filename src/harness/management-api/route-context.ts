import type { ManagementAnswer } from "./answers.js";
import type { ManagementStore, StoredEndpoint } from "./store.js";

/** What the harness learns when an endpoint is created or changed. */
export interface EndpointEvent {
  readonly endpoint: StoredEndpoint;
  /** True when the change made a new release: workers started before it should be replaced. */
  readonly rollout: boolean;
}

/** A worker of an endpoint as the harness sees it, for `GET /v2/serverless/{id}/workers` and `releases`. */
export interface EndpointWorkerView {
  readonly id: string;
  readonly status: "RUNNING" | "IDLE" | "INITIALIZING" | "UNHEALTHY";
  /** When it was first seen, ms since the epoch. */
  readonly startedAt: number;
}

/** Context handed to the per-resource route tables. */
export interface RouteContext {
  readonly store: ManagementStore;
  readonly clock: () => number;
  readonly hook: (fn: (() => unknown) | undefined) => void;
  /** The workers running an endpoint now (none without a harness attached). */
  readonly workers: (endpointId: string) => readonly EndpointWorkerView[];
}

/**
 * One CRUD resource of the management copy (docs/management.md): the five operations on
 * `/v2/<name>` and `/v2/<name>/{id}`, which routes.ts declares once for every resource. Bodies
 * come parsed (a JSON object) by the router.
 */
export interface CrudResource {
  readonly name: "templates" | "serverless" | "network-volumes" | "registries";
  list(): ManagementAnswer;
  /** `origin`: the harness's origin as the caller reached it (`http://127.0.0.1:8000`), for URLs in answers. */
  create(body: Readonly<Record<string, unknown>>, origin: string): ManagementAnswer;
  get(id: string): ManagementAnswer;
  update(id: string, body: Readonly<Record<string, unknown>>): ManagementAnswer;
  remove(id: string): ManagementAnswer;
  /** `/v2/<name>/{id}/<rest>`: a sub-resource (501 where the platform has one the copy does not keep, else 404). */
  below(id: string, rest: string): ManagementAnswer;
}
