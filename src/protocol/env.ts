/**
 * The names of the variables the platform injects into a worker (docs/protocol.md, "Environment"), in one
 * place: the worker's config reads them and the harness's workerEnv() writes them.
 */
export const PLATFORM_ENV = Object.freeze({
  /** job-take URL template; its presence means "running on the platform". */
  jobTakeUrl: "RUNPOD_WEBHOOK_GET_JOB",
  /** job-done URL template. */
  jobDoneUrl: "RUNPOD_WEBHOOK_POST_OUTPUT",
  /** job-stream URL template. */
  jobStreamUrl: "RUNPOD_WEBHOOK_POST_STREAM",
  /** ping URL template. */
  pingUrl: "RUNPOD_WEBHOOK_PING",
  /** Heartbeat period, ms. */
  pingInterval: "RUNPOD_PING_INTERVAL",
  /** The key sent in `Authorization`. */
  apiKey: "RUNPOD_AI_API_KEY",
  /** This worker's id. */
  podId: "RUNPOD_POD_ID",
  /** Host name for error reports. */
  hostname: "RUNPOD_POD_HOSTNAME",
  /** The endpoint's id; when set, logs are JSON lines. */
  endpointId: "RUNPOD_ENDPOINT_ID",
  /** The GPU type, substituted into URL templates. */
  gpuTypeId: "RUNPOD_GPU_TYPE_ID",
  /** Log level. */
  logLevel: "RUNPOD_LOG_LEVEL",
  /** Log level, older name. */
  debugLevel: "RUNPOD_DEBUG_LEVEL",
} as const);
