import { z } from "zod";
import { checkGpuCpu, cpuSchema, envSchema, gpuSchema, portsSchema } from "./common.js";

/**
 * v2 serverless endpoint bodies (docs/protocol.md, "Management API"): `templateId`, or `name` + `image` + `gpu`
 * given directly; worker and scaling settings nest under `workers` and `scaling` (replacing
 * v1's `workersMin`, `workersMax`, `scalerType`, `idleTimeout`).
 */

/** `workers: {min, max}` — worker counts; `min ≤ max`. Other fields (e.g. an idle timeout) pass through. */
export const workersSchema = z
  .looseObject({
    min: z.number().int().min(0, "workers.min must be an integer ≥ 0").optional(),
    max: z.number().int().min(0, "workers.max must be an integer ≥ 0").optional(),
  })
  .refine((w) => w.min === undefined || w.max === undefined || w.min <= w.max, {
    error: "workers.min must be ≤ workers.max",
    path: ["max"],
  });

/** `scaling: {type, value}` — QUEUE_DELAY (seconds waited) or REQUEST_COUNT (requests per worker). */
export const scalingSchema = z.looseObject({
  type: z.enum(["QUEUE_DELAY", "REQUEST_COUNT"]).optional(),
  value: z.number().positive("scaling.value must be > 0").optional(),
});

const endpointFields = {
  name: z.string().min(1, "name must not be empty").optional(),
  templateId: z.string().min(1, "templateId must not be empty").optional(),
  image: z.string().min(1, "image must not be empty").optional(),
  gpu: gpuSchema.optional(),
  cpu: cpuSchema.optional(),
  workers: workersSchema.optional(),
  scaling: scalingSchema.optional(),
  env: envSchema.optional(),
  ports: portsSchema.optional(),
};

/** `POST /v2/serverless`. Without `templateId`, `name`, `image` and one of `gpu`/`cpu` are required. */
export const serverlessCreateSchema = z.looseObject(endpointFields).superRefine((value, ctx) => {
  if (value.templateId === undefined) {
    for (const field of ["name", "image"] as const) {
      if (value[field] === undefined) {
        ctx.addIssue({
          code: "custom",
          message: "required when no templateId is given",
          path: [field],
        });
      }
    }
    checkGpuCpu(value, ctx, true);
  } else {
    checkGpuCpu(value, ctx, false);
  }
});
export type ServerlessCreateInput = z.input<typeof serverlessCreateSchema>;

/** `PATCH /v2/serverless/{id}`: any subset; never both `gpu` and `cpu`. */
export const serverlessUpdateSchema = z
  .looseObject(endpointFields)
  .superRefine((value, ctx) => checkGpuCpu(value, ctx, false));
export type ServerlessUpdateInput = z.input<typeof serverlessUpdateSchema>;

/** A serverless endpoint as v2 answers it. */
export const endpointSchema = z.looseObject({
  id: z.string(),
  name: z.string().optional(),
  templateId: z.string().optional(),
  workers: z.looseObject({ min: z.number().optional(), max: z.number().optional() }).optional(),
});
export type Endpoint = z.infer<typeof endpointSchema>;
