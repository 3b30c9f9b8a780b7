import { z } from "zod";

/** v2 container registry credentials (openapi/runpod-v2.json: `CreateRegistryRequest`, `Registry`). */

/** `POST /v2/registries`: a name and the registry's username and password; no other fields. */
export const registryCreateSchema = z.strictObject({
  name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
  username: z.string({ error: "username is required" }).min(1, "username must not be empty"),
  password: z.string({ error: "password is required" }).min(1, "password must not be empty"),
});
export type RegistryCreateInput = z.input<typeof registryCreateSchema>;

/** A registry credential as v2 answers it: its id (what a template's `registry` takes) and name. */
export const registrySchema = z.looseObject({ id: z.string(), name: z.string().optional() });
export type Registry = z.infer<typeof registrySchema>;
