import { z } from "zod";

/**
 * Bodies a worker posts (docs/protocol.md, "Results" and "Streaming") and the job-stop answer ("Stopping one job").
 * One schema per wire body; the worker builds them, the harness parses them.
 */

/** Final success: `{"output": <value>}` (plus `stopPod` when the worker must be replaced). */
export const doneOutputBodySchema = z.object({
  output: z.unknown(),
  stopPod: z.literal(true).optional(),
});

/** Final failure: `{"error": "<string>"}` — a string: an object here makes the platform mark the job COMPLETED. */
export const doneErrorBodySchema = z.object({
  error: z.string(),
  stopPod: z.literal(true).optional(),
});

/** A progress update (not final): `{"status": "IN_PROGRESS", "output": <progress>}`. */
export const progressBodySchema = z.object({
  status: z.literal("IN_PROGRESS"),
  output: z.unknown(),
});

/** Any body posted to job-done. A body without `status` is final. */
export const jobDoneBodySchema = z.union([progressBodySchema, doneErrorBodySchema, doneOutputBodySchema]);
export type JobDoneBody = z.infer<typeof jobDoneBodySchema>;

/** The metrics runlet attaches to each stream chunk; handlers' own metrics ride along. */
export const chunkMetricsSchema = z.looseObject({
  /** Index of the yielded item this chunk belongs to (0-based). */
  streamIndex: z.number().int().min(0),
  /** Index of this chunk within its item (0-based). */
  part: z.number().int().min(0),
  /** How many chunks the item was split into. */
  parts: z.number().int().min(1),
  /** How `output` encodes the item: whole JSON value, a string slice, a JSON-text slice, or a base64 slice. */
  encoding: z.enum(["json", "string", "json-text", "base64"]),
  /** Size in bytes of the item's JSON (for base64, of its bytes). */
  bytes: z.number().int().min(0),
});
export type ChunkMetrics = z.infer<typeof chunkMetricsSchema>;

/** One stream chunk: `{"output": <item or slice>, "metrics": {...}}` posted to job-stream. */
export const streamChunkSchema = z.object({
  output: z.unknown(),
  metrics: z.record(z.string(), z.union([z.number(), z.string(), z.boolean(), z.null()])).optional(),
});
export type StreamChunk = z.infer<typeof streamChunkSchema>;

/** job-stop answer with 200: which jobs to stop. */
export const jobsToStopSchema = z.object({ jobsToStop: z.array(z.string()) });
export type JobsToStop = z.infer<typeof jobsToStopSchema>;

/** The JSON text placed in `{"error": ...}` when a handler throws (docs/protocol.md, "Results"). */
export const errorReportSchema = z.object({
  error_type: z.string(),
  error_message: z.string(),
  error_traceback: z.string(),
  hostname: z.string(),
  worker_id: z.string(),
  runpod_version: z.string(),
});
export type ErrorReport = z.infer<typeof errorReportSchema>;

// In its own module so the worker reaches it without this one's schemas (docs/benchmarks.md, "Cold start").
export { RESULT_POST_HEADERS } from "./headers.js";
