import { z } from "zod";

/**
 * v2 catalog answers (openapi/runpod-v2.json: `GpuType`, `CpuType`, `DataCenter`), typed as far as
 * runlet reads them; the other fields pass through.
 */

/** A GPU type: its id (what `gpu.excludedTypes` takes) and the serverless pool it belongs to (null: none). */
export const gpuTypeSchema = z.looseObject({
  id: z.string(),
  name: z.string(),
  pool: z.string().nullable(),
  memory: z.number().optional(),
});
export type GpuType = z.infer<typeof gpuTypeSchema>;

/** A CPU flavour: its id and the vCPU counts it comes in. */
export const cpuTypeSchema = z.looseObject({
  id: z.string(),
  name: z.string().optional(),
  vcpu: z.looseObject({ min: z.number(), max: z.number() }).optional(),
});
export type CpuType = z.infer<typeof cpuTypeSchema>;

/** A data center. */
export const dataCenterSchema = z.looseObject({ id: z.string(), name: z.string().optional() });
export type DataCenter = z.infer<typeof dataCenterSchema>;
