export { type ManagementAnswer, problem, v1Error } from "./answers.js";
export {
  type EndpointTarget,
  endpointOptionsOf,
  type HarnessManagement,
  type HarnessManagementOptions,
  harnessManagement,
  lbOptionsOf,
} from "./attach.js";
export { CATALOG_CPUS, CATALOG_DATA_CENTERS, CATALOG_GPUS } from "./catalog-table.js";
export { documentProblems } from "./document-schemas.js";
export { MAX_MANAGEMENT_BODY_BYTES, mountManagementRoutes } from "./mount.js";
export { EMULATED_V2_SEGMENTS, isManagementPath, MANAGEMENT_V2_SEGMENTS } from "./paths.js";
export type { EndpointEvent, EndpointWorkerView } from "./route-context.js";
export {
  createManagementRoutes,
  type ManagementRequest,
  type ManagementRoutes,
  type ManagementRoutesOptions,
} from "./routes.js";
export { DEFAULT_TIMEOUT_MS, DEFAULT_WORKERS, requestUrlsOf } from "./serverless-routes.js";
export {
  ManagementStore,
  type StoredEndpoint,
  type StoredTemplateRecord,
  type TemplateOwner,
  type TemplateSeed,
} from "./store.js";
