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

/**
 * The fitness-check variables (docs/fitness.md): the names and defaults of the platform's Python
 * SDK, so an image behaves the same whichever SDK it runs; the last two are runlet's own.
 */
export const FITNESS_ENV = Object.freeze({
  /** Least memory available to the worker, in GB (decimal allowed). */
  minMemoryGb: "RUNPOD_MIN_MEMORY_GB",
  /** Least free share of `/`, in percent (0–100). */
  minDiskPercent: "RUNPOD_MIN_DISK_PERCENT",
  /** The network check's connect timeout, in seconds. */
  networkCheckTimeout: "RUNPOD_NETWORK_CHECK_TIMEOUT",
  /** Oldest CUDA version the driver may support, `major.minor`. */
  minCudaVersion: "RUNPOD_MIN_CUDA_VERSION",
  /** Bound on each GPU probe (nvidia-smi, the gpu_test binary), in seconds. */
  gpuTestTimeout: "RUNPOD_GPU_TEST_TIMEOUT",
  /** The Python SDK's bound on its compute benchmark, in seconds (read and validated; see docs/fitness.md). */
  gpuBenchmarkTimeout: "RUNPOD_GPU_BENCHMARK_TIMEOUT",
  /** `true`: no built-in memory, disk, network and CUDA checks. */
  skipAutoSystemChecks: "RUNPOD_SKIP_AUTO_SYSTEM_CHECKS",
  /** `true`: no GPU device check. */
  skipGpuCheck: "RUNPOD_SKIP_GPU_CHECK",
  /** A gpu_test-style binary to run for the allocation test (the Python SDK's name for its override). */
  gpuTestBinary: "RUNPOD_BINARY_GPU_TEST_PATH",
  /** runlet's own: where the network check connects, `host:port[,host:port...]`, or `off`. */
  networkCheckTarget: "RUNPOD_NETWORK_CHECK_TARGET",
} as const);
