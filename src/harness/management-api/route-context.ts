import type { TemplateV1 } from "../../protocol/management/index.js";
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
