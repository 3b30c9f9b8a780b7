import { z } from "zod";
import { EXECUTION_TIMEOUT_MS, TTL_MS } from "./limits.js";

/**
 * `s3Config` of a job (docs/protocol.md, "Job bodies"), complete, as the worker's S3 module needs it. Unknown keys
 * (e.g. the official JS client's `objectPath`) are kept: the platform passes the object through.
 */
export const s3ConfigSchema = z.looseObject({
  accessId: z.string(),
  accessSecret: z.string(),
  bucketName: z.string(),
  endpointUrl: z.string(),
});
export type S3Config = z.infer<typeof s3ConfigSchema>;

/** `policy` of a job, as a client sends it (bounds checked by the harness; unknown keys kept). */
export const policySchema = z.looseObject({
  executionTimeout: z
    .number()
    .int()
    .min(
      EXECUTION_TIMEOUT_MS.min,
      `policy.executionTimeout must be between ${EXECUTION_TIMEOUT_MS.min} and ${EXECUTION_TIMEOUT_MS.max} ms`,
    )
    .max(
      EXECUTION_TIMEOUT_MS.max,
      `policy.executionTimeout must be between ${EXECUTION_TIMEOUT_MS.min} and ${EXECUTION_TIMEOUT_MS.max} ms`,
    )
    .optional(),
  lowPriority: z.boolean().optional(),
  ttl: z
    .number()
    .int()
    .min(TTL_MS.min, `policy.ttl must be between ${TTL_MS.min} and ${TTL_MS.max} ms`)
    .max(TTL_MS.max, `policy.ttl must be between ${TTL_MS.min} and ${TTL_MS.max} ms`)
    .optional(),
});
export type Policy = z.infer<typeof policySchema>;

/**
 * A job as the platform delivers it to a worker (docs/protocol.md, "Taking jobs"): `id` and `input` are required;
 * every other key (`webhook`, `policy`, `s3Config`, `batchId`, ...) passes through untouched.
 * The worker reads `policy` leniently: a malformed policy is ignored rather than failing the job.
 */
export const deliveredJobSchema = z.looseObject({
  id: z.string().min(1, "job id must be a non-empty string"),
  input: z.unknown().refine((v) => v !== undefined, "job has no input"),
});
export type DeliveredJob = z.infer<typeof deliveredJobSchema> & {
  policy?: unknown;
  s3Config?: unknown;
  webhook?: unknown;
  batchId?: unknown;
};
