export { type ManagementAnswer, problem, v1Error } from "./answers.js";
export {
  type EndpointTarget,
  endpointOptionsOf,
  type HarnessManagement,
  type HarnessManagementOptions,
  harnessManagement,
} from "./attach.js";
export { MAX_MANAGEMENT_BODY_BYTES, mountManagementRoutes } from "./mount.js";
export { EMULATED_V2_SEGMENTS, isManagementPath, MANAGEMENT_V2_SEGMENTS } from "./paths.js";
export type { EndpointEvent } from "./route-context.js";
export {
  createManagementRoutes,
  type ManagementRequest,
  type ManagementRoutes,
  type ManagementRoutesOptions,
} from "./routes.js";
export { DEFAULT_WORKERS } from "./serverless-routes.js";
export { ManagementStore, type StoredEndpoint, type TemplateOwner, type TemplateSeed } from "./store.js";
