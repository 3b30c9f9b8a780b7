import { z } from "zod";

/** v2 network volume bodies (docs/protocol.md, "Management API"): `dataCenter` (was `dataCenterId`), optional `type`. */

/** `type` of a network volume. */
export const networkVolumeTypeSchema = z.enum(["STANDARD", "HIGH_PERFORMANCE"], {
  error: (iss) => `type must be STANDARD or HIGH_PERFORMANCE, got ${JSON.stringify(iss.input)}`,
});

/** `POST /v2/network-volumes`: `name` and `dataCenter` required; size in GB when given. */
export const networkVolumeCreateSchema = z.looseObject({
  name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
  dataCenter: z.string({ error: "dataCenter is required (v1's dataCenterId)" }).min(1),
  size: z.number().int().min(1, "size must be an integer ≥ 1 (GB)").optional(),
  type: networkVolumeTypeSchema.optional(),
});
export type NetworkVolumeCreateInput = z.input<typeof networkVolumeCreateSchema>;

/** `PATCH /v2/network-volumes/{id}`. */
export const networkVolumeUpdateSchema = z.looseObject({
  name: z.string().min(1).optional(),
  size: z.number().int().min(1, "size must be an integer ≥ 1 (GB)").optional(),
});
export type NetworkVolumeUpdateInput = z.input<typeof networkVolumeUpdateSchema>;

/** A network volume as v2 answers it. */
export const networkVolumeSchema = z.looseObject({ id: z.string() });
export type NetworkVolume = z.infer<typeof networkVolumeSchema>;
