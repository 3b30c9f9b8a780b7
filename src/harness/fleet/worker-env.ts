import { randomUUID } from "node:crypto";
import { PLATFORM_ENV } from "../../protocol/index.js";

/** `RUNPOD_GPU_TYPE_ID` of the harness's workers when no other is given. */
export const DEFAULT_GPU_TYPE_ID = "LOCAL";

/** Options of `Harness.workerEnv`. */
export interface WorkerEnvOptions {
  /** The worker's id (`RUNPOD_POD_ID`). @default `<endpoint>-<8 random hex digits>` */
  readonly podId?: string;
  /** `RUNPOD_PING_INTERVAL`, ms. @default unset (the worker's default) */
  readonly pingIntervalMs?: number;
  /** `RUNPOD_GPU_TYPE_ID`, which a runlet worker substitutes for `$RUNPOD_GPU_TYPE_ID` in the `gpu=` query (the harness accepts any value). @default the harness's `gpuTypeId` */
  readonly gpuTypeId?: string;
  /** `RUNPOD_POD_HOSTNAME`, which workers put in error reports. @default the pod id */
  readonly hostname?: string;
}

/**
 * The platform environment (docs/protocol.md, "Environment") with which a worker connects to one endpoint of a
 * harness at `baseUrl`, in production's shapes: the job-take template names the worker by `$ID`,
 * the ping, job-done and job-stream templates by `$RUNPOD_POD_ID` (with `$ID` the job id), and
 * every template carries `?gpu=$RUNPOD_GPU_TYPE_ID`. Any worker that reads the platform's
 * variables — runlet's, or one written with the platform's Python SDK — connects with it as is.
 * `RUNPOD_ENDPOINT_ID` is left out on purpose: it switches workers to JSON-line logs.
 */
export function workerEnvFor(
  baseUrl: string,
  endpointId: string,
  apiKey: string,
  options: WorkerEnvOptions & {
    readonly gpuTypeId: string;
    /** Give the ping URL (`RUNPOD_WEBHOOK_PING`); false for a harness in memory. @default true */
    readonly ping?: boolean;
  },
): Record<string, string> {
  const base = `${baseUrl}/v2/${encodeURIComponent(endpointId)}`;
  const gpu = "?gpu=$RUNPOD_GPU_TYPE_ID";
  const podId = options.podId ?? `${endpointId}-${randomUUID().slice(0, 8)}`;
  const E = PLATFORM_ENV;
  return {
    [E.jobTakeUrl]: `${base}/job-take/$ID${gpu}`,
    [E.jobDoneUrl]: `${base}/job-done/$RUNPOD_POD_ID/$ID${gpu}`,
    [E.jobStreamUrl]: `${base}/job-stream/$RUNPOD_POD_ID/$ID${gpu}`,
    ...(options.ping === false ? {} : { [E.pingUrl]: `${base}/ping/$RUNPOD_POD_ID${gpu}` }),
    [E.apiKey]: apiKey,
    [E.podId]: podId,
    [E.hostname]: options.hostname ?? podId,
    [E.gpuTypeId]: options.gpuTypeId,
    ...(options.pingIntervalMs === undefined ? {} : { [E.pingInterval]: String(options.pingIntervalMs) }),
  };
}
