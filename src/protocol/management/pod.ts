import { z } from "zod";
import {
  checkGpuCpu,
  cloudSchema,
  commandSchema,
  cpuSchema,
  envSchema,
  gpuSchema,
  mountSchema,
  portsSchema,
} from "./common.js";

/** v2 pod bodies (docs/protocol.md, "Management API"): nested `gpu`/`cpu`/`mounts`, exactly one of gpu or cpu. */

const podFields = {
  gpu: gpuSchema.optional(),
  cpu: cpuSchema.optional(),
  mounts: z.array(mountSchema).optional(),
  env: envSchema.optional(),
  ports: portsSchema.optional(),
  dockerEntrypoint: commandSchema.optional(),
  dockerStartCmd: commandSchema.optional(),
  templateId: z.string().min(1).optional(),
};

/** `POST /v2/pods`: `name` and `image` required, exactly one of `gpu` or `cpu`, `cloud` defaults to SECURE. */
export const podCreateSchema = z
  .looseObject({
    name: z.string({ error: "name is required" }).min(1, "name must not be empty"),
    image: z.string({ error: "image is required" }).min(1, "image must not be empty"),
    cloud: cloudSchema.default("SECURE"),
    ...podFields,
  })
  .superRefine((value, ctx) => checkGpuCpu(value, ctx, true));
export type PodCreateInput = z.input<typeof podCreateSchema>;

/** `PATCH /v2/pods/{id}`: any subset; still never both `gpu` and `cpu`. */
export const podUpdateSchema = z
  .looseObject({
    name: z.string().min(1).optional(),
    image: z.string().min(1).optional(),
    cloud: cloudSchema.optional(),
    ...podFields,
  })
  .superRefine((value, ctx) => checkGpuCpu(value, ctx, false));
export type PodUpdateInput = z.input<typeof podUpdateSchema>;

/** `POST /v2/pods/{id}/action` body field `action`. v1's `reset` has no v2 equivalent. */
export const podActionSchema = z.enum(["start", "stop", "restart", "terminate"], {
  error: (iss) => `action must be one of start, stop, restart, terminate, got ${JSON.stringify(iss.input)}`,
});
export type PodAction = z.infer<typeof podActionSchema>;

/** A pod as v2 answers it: an `id`, the rest passed through. */
export const podSchema = z.looseObject({ id: z.string() });
export type Pod = z.infer<typeof podSchema>;
