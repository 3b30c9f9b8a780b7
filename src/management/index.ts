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
  type CpuSpec,
  cloudSchema,
  cpuSchema,
  envSchema,
  type GpuSpec,
  gpuSchema,
  portSchema,
  portsSchema,
  type Resource,
} from "./schemas/common.js";
export {
  type NetworkVolume,
  type NetworkVolumeCreateInput,
  type NetworkVolumeUpdateInput,
  networkVolumeCreateSchema,
  networkVolumeSchema,
  networkVolumeTypeSchema,
  networkVolumeUpdateSchema,
} from "./schemas/network-volume.js";
export {
  type Pod,
  type PodAction,
  type PodCreateInput,
  type PodUpdateInput,
  podActionSchema,
  podCreateSchema,
  podSchema,
  podUpdateSchema,
} from "./schemas/pod.js";
export {
  type Endpoint,
  endpointSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  scalingSchema,
  serverlessCreateSchema,
  serverlessUpdateSchema,
  workersSchema,
} from "./schemas/serverless.js";
export {
  registryRefSchema,
  type TemplateCreateInput,
  type TemplateUpdateInput,
  type TemplateV1,
  type TemplateV2,
  templateCreateSchema,
  templateUpdateSchema,
  templateV1Schema,
  templateV2Schema,
} from "./schemas/template.js";
export { templateV1ToV2, templateV2ToV1 } from "./template-mapping.js";
export {
  DEFAULT_RETRY_METHODS,
  type HttpMethod,
  type PreparedRequest,
  type Query,
} from "./transport.js";
export { type FieldIssue, fieldIssues, issueMessages, validateBody } from "./validate.js";
