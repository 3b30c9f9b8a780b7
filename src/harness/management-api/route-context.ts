import type { TemplateV1 } from "../../protocol/management/index.js";
import type { ManagementAnswer } from "./answers.js";
import type { ManagementStore, StoredEndpoint } from "./store.js";

/** What the harness learns when an endpoint is created or changed. */
export interface EndpointEvent {
  readonly endpoint: StoredEndpoint;
  /** Its template, when it was created from one. */
  readonly template: TemplateV1 | undefined;
}

/** Context handed to the per-resource route tables. */
export interface RouteContext {
  readonly store: ManagementStore;
  readonly clock: () => number;
  readonly hook: (fn: (() => unknown) | undefined) => void;
}

/**
 * One CRUD resource of the management copy (docs/management.md): the five operations on
 * `/v2/<name>` and `/v2/<name>/{id}`, which routes.ts declares once for every resource. Bodies
 * come parsed (a JSON object) by the router.
 */
export interface CrudResource {
  readonly name: "templates" | "serverless";
  list(): ManagementAnswer;
  create(body: Readonly<Record<string, unknown>>): ManagementAnswer;
  get(id: string): ManagementAnswer;
  update(id: string, body: Readonly<Record<string, unknown>>): ManagementAnswer;
  remove(id: string): ManagementAnswer;
  /** `/v2/<name>/{id}/<rest>`: a sub-resource (501 where the platform has one the copy does not keep, else 404). */
  below(id: string, rest: string): ManagementAnswer;
}
