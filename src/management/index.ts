export {
  type CpuSpec,
  cloudSchema,
  cpuSchema,
  type Endpoint,
  endpointSchema,
  envSchema,
  type FieldIssue,
  fieldIssues,
  type GpuSpec,
  gpuSchema,
  issueMessages,
  type NetworkVolume,
  type NetworkVolumeCreateInput,
  type NetworkVolumeUpdateInput,
  networkVolumeCreateSchema,
  networkVolumeSchema,
  networkVolumeTypeSchema,
  networkVolumeUpdateSchema,
  type Pod,
  type PodAction,
  type PodCreateInput,
  type PodUpdateInput,
  podActionSchema,
  podCreateSchema,
  podSchema,
  podUpdateSchema,
  portSchema,
  portsSchema,
  type Resource,
  registryRefSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  scalingSchema,
  serverlessCreateSchema,
  serverlessUpdateSchema,
  type TemplateCreateInput,
  type TemplateUpdateInput,
  type TemplateV1,
  type TemplateV2,
  templateCreateSchema,
  templateUpdateSchema,
  templateV1Schema,
  templateV1ToV2,
  templateV2Schema,
  templateV2ToV1,
  workersSchema,
} from "../protocol/management/index.js";
export type { CallOptions, ListOptions } from "./api/call.js";
export type {
  BillingApi,
  CatalogApi,
  ClustersApi,
} from "./api/catalog.js";
export type { PodsApi } from "./api/pods.js";
export type { ServerlessApi } from "./api/serverless.js";
export { type NetworkVolumesApi, type RegistriesApi, type Registry, registrySchema } from "./api/storage.js";
export type { GetTemplateV1Options, TemplatesApi } from "./api/templates.js";
export {
  createManagementClient,
  DEFAULT_MANAGEMENT_BASE_URL,
  DEFAULT_MANAGEMENT_V1_BASE_URL,
  type ManagementClient,
  type ManagementClientOptions,
  type ManagementClientV1,
  type RawRequest,
} from "./client.js";
export {
  DEPLOY_DEFAULT_WORKERS,
  type DeployResult,
  type DeploySpec,
  type DeployStep,
  deploy,
  type EndpointStep,
  findExisting,
  planDeploy,
  stepRequest,
  TEMPLATE_ID_PLACEHOLDER,
  type TemplateStep,
} from "./deploy.js";
export {
  type ManagementErrorDetails,
  managementHttpError,
  parseErrorBody,
  parseRetryAfterMs,
} from "./problem.js";
export {
  DEFAULT_RETRY_METHODS,
  type HttpMethod,
  type PreparedRequest,
  type Query,
} from "./transport.js";
export { validateBody } from "./validate.js";
