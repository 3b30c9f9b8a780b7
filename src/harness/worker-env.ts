import { randomUUID } from "node:crypto";

/** Options of `Harness.workerEnv`. */
export interface WorkerEnvOptions {
  /** The worker's id (`RUNPOD_POD_ID`). @default a fresh random id */
  readonly podId?: string;
  /** `RUNPOD_PING_INTERVAL`, ms. @default unset (the worker's default) */
  readonly pingIntervalMs?: number;
}

/**
 * The platform environment (worker-protocol §1) with which a worker connects to one endpoint of a
 * harness at `baseUrl`. Every template keeps the `$RUNPOD_POD_ID` placeholder, which runlet's
 * worker substitutes (`runlet harness` rewrites the job-take one to `$ID` for the Python SDK).
 */
export function workerEnvFor(
  baseUrl: string,
  endpointId: string,
  apiKey: string,
  options: WorkerEnvOptions = {},
): Record<string, string> {
  const base = `${baseUrl}/v2/${encodeURIComponent(endpointId)}`;
  const gpu = "?gpu=$RUNPOD_GPU_TYPE_ID";
  return {
    RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$RUNPOD_POD_ID${gpu}`,
    RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID${gpu}`,
    RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID${gpu}`,
    RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID${gpu}`,
    RUNPOD_AI_API_KEY: apiKey,
    RUNPOD_POD_ID: options.podId ?? `${endpointId}-${randomUUID().slice(0, 8)}`,
    ...(options.pingIntervalMs === undefined ? {} : { RUNPOD_PING_INTERVAL: String(options.pingIntervalMs) }),
  };
}
