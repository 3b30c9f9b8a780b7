export {
  type Concurrency,
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
} from "./define-handler.js";
export { type ExecuteHooks, type ExecuteOptions, type ExecuteOutcome, executeJob } from "./execute.js";
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
export {
  DEFAULT_CHECK_NAME,
  healthCheckFailure,
  type Unfitness,
  unfitnessOf,
  WorkerUnfitError,
} from "./unfit.js";
