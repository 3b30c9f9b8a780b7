import { z } from "zod";
import { commandSchema, containerFields, cudaVersionSchema } from "./common.js";

/**
 * Templates in both versions. v1 (docs/protocol.md, "Templates") is what `GET /v1/templates/{id}`
 * answered; v2 is the published v2 document's `Template` (openapi/runpod-v2.json), whose names
 * differ: `imageName`→`image`, `containerDiskInGb`→`disk`, `isPublic`→`public`,
 * `isServerless`→`serverless`, `containerRegistryAuthId`→`registry` (the credential id string).
 */

/** Optional string fields may come back as `null` from the platform; both mean "not set". */
const optionalText = z.string().nullish();

/** The v1 Template (docs/protocol.md, "Templates"). `id`, `name` and `imageName` are required; every other field is typed when present. */
export const templateV1Schema = z.looseObject({
  id: z.string(),
  name: z.string(),
  imageName: z.string(),
  category: optionalText,
  containerDiskInGb: z.number().int().optional(),
  volumeInGb: z.number().int().optional(),
  volumeMountPath: optionalText,
  containerRegistryAuthId: optionalText,
  dockerEntrypoint: commandSchema.optional(),
  dockerStartCmd: commandSchema.optional(),
  env: z.record(z.string(), z.string()).optional(),
  ports: z.array(z.string()).optional(),
  readme: optionalText,
  isPublic: z.boolean().optional(),
  isRunpod: z.boolean().optional(),
  isServerless: z.boolean().optional(),
  earned: z.number().optional(),
  runtimeInMin: z.number().int().optional(),
});
export type TemplateV1 = z.infer<typeof templateV1Schema>;

/** `category`: how the console groups a template (it does not pick hardware). @default "NVIDIA" */
export const templateCategorySchema = z.enum(["CPU", "NVIDIA", "AMD"], {
  error: (iss) => `category must be CPU, NVIDIA or AMD, got ${JSON.stringify(iss.input)}`,
});

/** `mounts` of a template: one persistent volume at most (`size` GB ≥ 10, mounted at `path`). */
export const templateMountsSchema = z.strictObject({
  persistent: z
    .strictObject({
      size: z.number().int().min(10, "mounts.persistent.size must be an integer ≥ 10 (GB)"),
      path: z.string(),
    })
    .optional(),
});

const templateFields = {
  ...containerFields,
  allowedCudaVersions: z.array(cudaVersionSchema).optional(),
  category: templateCategorySchema.optional(),
  mounts: templateMountsSchema.optional(),
  public: z.boolean().optional(),
  /** Whether the template is for serverless workers. @default false (the document's) */
  serverless: z.boolean().optional(),
  /** Start JupyterLab, injecting a generated JUPYTER_PASSWORD. @default true (the document's) */
  startJupyter: z.boolean().optional(),
  /** Provision SSH, injecting PUBLIC_KEY. @default true (the document's) */
  startSsh: z.boolean().optional(),
};

/** `POST /v2/templates` (the document's `CreateTemplateRequest`): `name` and `image` required, no other fields. */
export const templateCreateSchema = z.strictObject({
  ...templateFields,
  name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
  image: z.string({ error: "image is required" }).min(1, "image must not be empty"),
});
export type TemplateCreateInput = z.input<typeof templateCreateSchema>;

/** `PATCH /v2/templates/{id}` (`UpdateTemplateRequest`): any subset. */
export const templateUpdateSchema = z.strictObject({
  ...templateFields,
  name: z.string().min(1, "name must not be empty").optional(),
});
export type TemplateUpdateInput = z.input<typeof templateUpdateSchema>;

/** A v2 template as the API answers it (`Template`); fields past `id`, `name` and `image` are typed when present. */
export const templateV2Schema = z.looseObject({
  id: z.string(),
  name: z.string(),
  image: z.string(),
  args: z.string().optional(),
  disk: z.number().optional(),
  env: z.record(z.string(), z.string()).optional(),
  ports: z.array(z.string()).optional(),
  registry: z.string().nullish(),
  serverless: z.boolean().optional(),
  public: z.boolean().optional(),
  category: z.string().optional(),
  startSsh: z.boolean().optional(),
  startJupyter: z.boolean().optional(),
  allowedCudaVersions: z.array(z.string()).optional(),
  mounts: z.looseObject({}).optional(),
});
export type TemplateV2 = z.infer<typeof templateV2Schema>;
