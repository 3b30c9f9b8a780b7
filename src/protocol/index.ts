export {
  type ApiError,
  apiErrorSchema,
  type Health,
  healthSchema,
  JOB_STATUSES,
  type JobRecord,
  type JobRef,
  type JobStatus,
  jobRecordSchema,
  jobRefSchema,
  jobStatusSchema,
  purgeResponseSchema,
  type RunRequest,
  runRequestSchema,
  runS3ConfigSchema,
  type StreamResponse,
  streamResponseSchema,
  TERMINAL_STATUSES,
} from "./api.js";
export { type BatchQuery, readBatchQuery, withBatchQuery } from "./batch-query.js";
export { FITNESS_ENV, PLATFORM_ENV } from "./env.js";
export {
  type DeliveredJob,
  deliveredJobSchema,
  type Policy,
  policySchema,
  type S3Config,
  s3ConfigSchema,
} from "./job.js";
export {
  DEFAULT_MAX_RESULT_BYTES,
  EXECUTION_TIMEOUT_MS,
  LOAD_BALANCER,
  MAX_RUN_PAYLOAD_BYTES,
  MAX_RUNSYNC_PAYLOAD_BYTES,
  MAX_STREAM_CHUNK_BYTES,
  RATE_LIMIT_WINDOW_MS,
  RATE_LIMITS,
  type RateLimitRule,
  RETENTION_MS,
  RUNSYNC_WAIT_MS,
  TTL_MS,
} from "./limits.js";
export {
  type OpenAIErrorBody,
  type OpenAIJobInput,
  openAIError,
  openAIJobInputSchema,
} from "./openai.js";
export { expandTemplate, swapTakeRoute, type TemplateValues, withQuery } from "./urls.js";
export {
  type ChunkMetrics,
  chunkMetricsSchema,
  doneErrorBodySchema,
  doneOutputBodySchema,
  type ErrorReport,
  errorReportSchema,
  type JobDoneBody,
  type JobsToStop,
  jobDoneBodySchema,
  jobsToStopSchema,
  progressBodySchema,
  RESULT_POST_HEADERS,
  type StreamChunk,
  streamChunkSchema,
} from "./worker-bodies.js";
