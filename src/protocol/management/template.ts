import { z } from "zod";
import { commandSchema, envSchema, portsSchema } from "./common.js";

/**
 * Templates in both versions. v1 (docs/protocol.md, "Templates") is what `GET /v1/templates/{id}` answers;
 * v2 renames four fields: `imageName`→`image`, `containerDiskInGb`→`disk`,
 * `isPublic`→`public`, `containerRegistryAuthId`→ nested `registry` (carried as `{id}`).
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

/** v2 `registry`: the container registry auth, nested (its fields beyond `id` pass through). */
export const registryRefSchema = z.looseObject({ id: z.string().min(1, "registry.id must not be empty") });

const templateFields = {
  disk: z.number().int().min(1, "disk must be an integer ≥ 1 (GB)").optional(),
  public: z.boolean().optional(),
  registry: registryRefSchema.optional(),
  env: envSchema.optional(),
  ports: portsSchema.optional(),
  dockerEntrypoint: commandSchema.optional(),
  dockerStartCmd: commandSchema.optional(),
  category: z.string().optional(),
  readme: z.string().optional(),
  isServerless: z.boolean().optional(),
};

/** `POST /v2/templates`: `name` and `image` required. */
export const templateCreateSchema = z.looseObject({
  name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
  image: z.string({ error: "image is required" }).min(1, "image must not be empty"),
  ...templateFields,
});
export type TemplateCreateInput = z.input<typeof templateCreateSchema>;

/** `PATCH /v2/templates/{id}`: any subset. */
export const templateUpdateSchema = z.looseObject({
  name: z.string().min(1, "name must not be empty").optional(),
  image: z.string().min(1, "image must not be empty").optional(),
  ...templateFields,
});
export type TemplateUpdateInput = z.input<typeof templateUpdateSchema>;

/** A v2 template as the API answers it. */
export const templateV2Schema = z.looseObject({
  id: z.string(),
  name: z.string(),
  image: z.string(),
  disk: z.number().optional(),
  public: z.boolean().optional(),
  registry: registryRefSchema.nullish(),
});
export type TemplateV2 = z.infer<typeof templateV2Schema>;
