/**
 * runlet's public surface: define a handler, run the worker loop, and the errors it raises.
 * Everything not exported here is internal.
 */

export type { CacheRun, WarmCacheDir, WarmCacheOptions } from "./cache/index.js";
export {
  ERROR_CODES,
  isRunletError,
  JobError,
  type JobErrorOptions,
  RunletError,
  type RunletErrorCode,
  type RunletErrorOptions,
} from "./errors.js";
export {
  type BatchContext,
  type BatchHandlerDefinition,
  type BatchHandlerFunction,
  type BatchHandlerOptions,
  type BatchJob,
  type BatchOptions,
  type BatchOutputs,
  type Concurrency,
  defineBatchHandler,
  defineHandler,
  type HandlerContext,
  type HandlerDefinition,
  type HandlerFunction,
  type HandlerOptions,
  type HealthCheck,
  type HealthCheckContext,
  isHandlerDefinition,
  type JobMetrics,
  type Setup,
  type SetupContext,
  type Teardown,
  WorkerUnfitError,
} from "./handler/index.js";
export {
  type CachedModel,
  type CachedModelOptions,
  cachedModelCheck,
  cachedModelEnv,
  HF_CACHE_ENV,
  type HfSource,
  hfCacheDir,
  hfDownloadUrl,
  isHfSource,
  PLATFORM_HF_CACHE,
  parseHfSource,
  type RequiredModel,
  resolveCachedModel,
} from "./models/index.js";
export type { JobS3, S3Reference } from "./s3/types.js";
export type { TelemetryOptions, TraceContextField } from "./telemetry/index.js";
export { VERSION } from "./version.js";
export {
  startWorker,
  type Worker,
  type WorkerEvents,
  type WorkerListener,
  type WorkerOptions,
  type WorkerStopInfo,
} from "./worker/index.js";
