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
} from "./common.js";
export { type FieldIssue, fieldIssues, fieldPath, issueMessages } from "./issues.js";
export {
  type NetworkVolume,
  type NetworkVolumeCreateInput,
  type NetworkVolumeUpdateInput,
  networkVolumeCreateSchema,
  networkVolumeSchema,
  networkVolumeTypeSchema,
  networkVolumeUpdateSchema,
} from "./network-volume.js";
export {
  type Pod,
  type PodAction,
  type PodCreateInput,
  type PodUpdateInput,
  podActionSchema,
  podCreateSchema,
  podSchema,
  podUpdateSchema,
} from "./pod.js";
export {
  type Endpoint,
  endpointSchema,
  type ServerlessCreateInput,
  type ServerlessUpdateInput,
  scalingSchema,
  serverlessCreateSchema,
  serverlessUpdateSchema,
  workersSchema,
} from "./serverless.js";
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
} from "./template.js";
export { templateV1ToV2, templateV2ToV1 } from "./template-mapping.js";
