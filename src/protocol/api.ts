import { z } from "zod";
import { policySchema } from "./job.js";

/** Bodies of the client-facing job API (docs/protocol.md, "Job API" and "Job bodies"), shared by the harness and the client. */

/** Job states (docs/protocol.md, "Job states"). */
export const JOB_STATUSES = [
  "IN_QUEUE",
  "IN_PROGRESS",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "TIMED_OUT",
] as const;
export const jobStatusSchema = z.enum(JOB_STATUSES);
export type JobStatus = z.infer<typeof jobStatusSchema>;
/** States after which a job changes no more (until a retry). */
export const TERMINAL_STATUSES: ReadonlySet<JobStatus> = new Set([
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "TIMED_OUT",
]);

/**
 * `s3Config` as a client may send it: the platform only passes it through to the worker, so every
 * field is optional and unknown keys are kept; the worker's S3 module says what is missing when used.
 */
export const runS3ConfigSchema = z.looseObject({
  accessId: z.string().optional(),
  accessSecret: z.string().optional(),
  bucketName: z.string().optional(),
  endpointUrl: z.string().optional(),
});

/**
 * `/run` and `/runsync` request body. `input` must be a JSON object; `policy` bounds are checked;
 * unknown keys (at the top level, in `policy`, in `s3Config`) are kept and reach the worker's job.
 */
export const runRequestSchema = z.looseObject({
  input: z.record(z.string(), z.unknown(), { error: "input must be a JSON object" }),
  webhook: z.url({ error: "webhook must be an http(s) URL", protocol: /^https?$/ }).optional(),
  policy: policySchema.optional(),
  s3Config: runS3ConfigSchema.optional(),
});
export type RunRequest = z.infer<typeof runRequestSchema>;

/** `{id, status}` answer of `/run`, `/cancel`, `/retry`. */
export const jobRefSchema = z.object({ id: z.string(), status: jobStatusSchema });
export type JobRef = z.infer<typeof jobRefSchema>;

/** A job record, as `/status`, `/runsync` and `/status-sync` answer it. */
export const jobRecordSchema = z.looseObject({
  id: z.string(),
  status: jobStatusSchema,
  delayTime: z.number().int().optional(),
  executionTime: z.number().int().optional(),
  output: z.unknown().optional(),
  error: z.string().optional(),
});
export type JobRecord = z.infer<typeof jobRecordSchema>;

/** `/stream/<id>` answer (docs/architecture.md, "Decisions", item 6): chunks since the caller's previous read. */
export const streamResponseSchema = z.object({
  status: jobStatusSchema,
  stream: z.array(
    z.object({
      output: z.unknown(),
      metrics: z.record(z.string(), z.union([z.number(), z.string(), z.boolean(), z.null()])).optional(),
    }),
  ),
});
export type StreamResponse = z.infer<typeof streamResponseSchema>;

/** `/purge-queue` answer. */
export const purgeResponseSchema = z.object({ removed: z.number().int(), status: z.literal("completed") });

/** `/health` answer. */
export const healthSchema = z.object({
  jobs: z.object({
    completed: z.number().int(),
    failed: z.number().int(),
    inProgress: z.number().int(),
    inQueue: z.number().int(),
    retried: z.number().int(),
  }),
  workers: z.looseObject({ idle: z.number().int(), running: z.number().int() }),
});
export type Health = z.infer<typeof healthSchema>;

/** The one error body of runlet's job API (the platform's is not specified): a message and, for validation, each issue. */
export const apiErrorSchema = z.object({
  error: z.string(),
  status: z.number().int(),
  issues: z.array(z.string()).optional(),
});
export type ApiError = z.infer<typeof apiErrorSchema>;

/**
 * One job in `GET /v2/<endpoint>/requests` (runlet's own shape: the platform lists the route
 * without one). Times are ISO 8601 on the harness clock; `delayTime` and `executionTime` in ms.
 * Never the job's input or output.
 */
export const jobListItemSchema = z.object({
  id: z.string(),
  status: jobStatusSchema,
  createdAt: z.string(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  delayTime: z.number().optional(),
  executionTime: z.number().optional(),
  workerId: z.string().optional(),
});
export type JobListItem = z.infer<typeof jobListItemSchema>;
/** `GET /v2/<endpoint>/requests`: the endpoint's recent jobs, newest first. */
export const jobListSchema = z.object({ requests: z.array(jobListItemSchema) });
export type JobList = z.infer<typeof jobListSchema>;
