import { z } from "zod";

/** v2 network volume bodies (openapi/runpod-v2.json: `CreateNetworkVolumeRequest`, `UpdateNetworkVolumeRequest`, `NetworkVolume`). */

/** `type` of a network volume. */
export const networkVolumeTypeSchema = z.enum(["STANDARD", "HIGH_PERFORMANCE"], {
  error: (iss) => `type must be STANDARD or HIGH_PERFORMANCE, got ${JSON.stringify(iss.input)}`,
});

const sizeSchema = z
  .number({ error: "size is required (GB, 10-4096)" })
  .int()
  .min(10, "size must be an integer 10-4096 (GB)")
  .max(4096, "size must be an integer 10-4096 (GB)");

/** `POST /v2/network-volumes`: `name`, `dataCenter` and `size` (GB) required, `type` optional; no other fields. */
export const networkVolumeCreateSchema = z.strictObject({
  name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
  dataCenter: z.string({ error: "dataCenter is required (a data center id such as EU-RO-1)" }).min(1),
  size: sizeSchema,
  type: networkVolumeTypeSchema.optional(),
});
export type NetworkVolumeCreateInput = z.input<typeof networkVolumeCreateSchema>;

/** `PATCH /v2/network-volumes/{id}`: a new `name` and/or a larger `size`; at least one. */
export const networkVolumeUpdateSchema = z
  .strictObject({ name: z.string().min(1).optional(), size: sizeSchema.optional() })
  .refine((v) => v.name !== undefined || v.size !== undefined, { error: "give name or size (or both)" });
export type NetworkVolumeUpdateInput = z.input<typeof networkVolumeUpdateSchema>;

/** A network volume as v2 answers it. */
export const networkVolumeSchema = z.looseObject({
  id: z.string(),
  name: z.string().optional(),
  size: z.number().optional(),
  dataCenter: z.string().optional(),
  type: z.string().optional(),
});
export type NetworkVolume = z.infer<typeof networkVolumeSchema>;
