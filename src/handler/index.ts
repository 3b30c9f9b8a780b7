export type {
  BatchContext,
  BatchHandlerFunction,
  BatchJob,
  BatchOptions,
  BatchOutputs,
  BatchSettings,
} from "./batch-types.js";
export {
  BATCH_DEFAULTS,
  type BatchHandlerDefinition,
  type BatchHandlerOptions,
  defineBatchHandler,
  isBatchDefinition,
} from "./define-batch-handler.js";
export {
  type Concurrency,
  checkedDefinition,
  defineHandler,
  HANDLER_BRAND,
  HANDLER_DEFAULTS,
  type HandlerContext,
  type HandlerDefinition,
  type HandlerFunction,
  type HandlerOptions,
  type HealthCheck,
  type HealthCheckContext,
  isHandlerDefinition,
  type Setup,
  type SetupContext,
  type Teardown,
} from "./define-handler.js";
export {
  type BatchInfo,
  type ExecuteHooks,
  type ExecuteOptions,
  type ExecuteOutcome,
  executeJob,
} from "./execute.js";
export {
  type BatchMember,
  type ExecuteBatchOptions,
  executeBatch,
  STREAMING_REFUSED,
} from "./execute-batch.js";
export { createJobMetrics, type JobMetrics } from "./metrics.js";
export {
  errorReport,
  failedResult,
  finalBodyText,
  inputErrorMessage,
  isErrorReturn,
  type JobResult,
  type ReportIdentity,
  returnedResult,
  toJsonText,
} from "./outcome.js";
export { type ParsedInput, parseInput } from "./parse-input.js";
export {
  DEFAULT_CHECK_NAME,
  healthCheckFailure,
  type Unfitness,
  unfitnessOf,
  WorkerUnfitError,
} from "./unfit.js";
