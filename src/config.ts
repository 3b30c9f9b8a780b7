import { randomUUID } from "node:crypto";
import { z } from "zod";
import { RunletError } from "./errors.js";

/**
 * The environment the platform injects into a worker (worker-protocol §1), parsed once and frozen.
 * No other module reads `process.env`: callers pass the result down.
 */

const optionalUrl = z
  .string()
  .trim()
  .transform((v) => (v === "" ? undefined : v))
  .pipe(z.url().optional())
  .optional();
const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === "" ? undefined : v))
  .optional();

const envSchema = z.object({
  RUNPOD_WEBHOOK_GET_JOB: optionalUrl,
  RUNPOD_WEBHOOK_POST_OUTPUT: optionalUrl,
  RUNPOD_WEBHOOK_POST_STREAM: optionalUrl,
  RUNPOD_WEBHOOK_PING: optionalUrl,
  RUNPOD_PING_INTERVAL: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === "" ? 10_000 : Number(v)))
    .pipe(z.number().int("RUNPOD_PING_INTERVAL must be an integer number of ms").min(100).max(600_000)),
  RUNPOD_AI_API_KEY: optionalString,
  RUNPOD_POD_ID: optionalString,
  RUNPOD_POD_HOSTNAME: optionalString,
  RUNPOD_ENDPOINT_ID: optionalString,
  RUNPOD_GPU_TYPE_ID: optionalString,
  RUNPOD_LOG_LEVEL: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === "" ? "info" : v.trim().toLowerCase()))
    .pipe(z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"])),
  BUCKET_ENDPOINT_URL: optionalUrl,
  BUCKET_ACCESS_KEY_ID: optionalString,
  BUCKET_SECRET_ACCESS_KEY: optionalString,
  BUCKET_NAME: optionalString,
});

/** What the platform told this worker through its environment. */
export interface PlatformEnv {
  /** job-take URL template; its presence means "running on the platform". */
  readonly jobTakeUrl: string | undefined;
  /** job-done URL template (`$ID` = job id). */
  readonly jobDoneUrl: string | undefined;
  /** job-stream URL template (`$ID` = job id). */
  readonly jobStreamUrl: string | undefined;
  /** ping URL template (`$ID` = worker id). */
  readonly pingUrl: string | undefined;
  /** Heartbeat period. @default 10000 */
  readonly pingIntervalMs: number;
  /** The raw key sent in `Authorization` on every worker request. */
  readonly apiKey: string | undefined;
  /** This worker's id. @default a random UUID */
  readonly podId: string;
  /** Host name for error reports. @default "unknown" */
  readonly hostname: string;
  /** Endpoint id; when set, logs are JSON lines. */
  readonly endpointId: string | undefined;
  /** GPU type, substituted into templates. @default "unknown" */
  readonly gpuTypeId: string;
  /** Log level. @default "info" */
  readonly logLevel: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
  /** Default S3-compatible store when a job carries no s3Config (`bucketName` from the optional BUCKET_NAME). */
  readonly bucket:
    | {
        readonly endpointUrl: string;
        readonly accessKeyId: string;
        readonly secretAccessKey: string;
        readonly bucketName?: string | undefined;
      }
    | undefined;
}

/** Parses the platform's variables from `env`; a bad value throws RUNLET_CONFIG_INVALID naming it. */
export function readPlatformEnv(env: Readonly<Record<string, string | undefined>>): PlatformEnv {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new RunletError("RUNLET_CONFIG_INVALID", `bad environment: ${problems.join("; ")}`, {
      details: { issues: problems },
    });
  }
  const e = parsed.data;
  const bucket =
    e.BUCKET_ENDPOINT_URL && e.BUCKET_ACCESS_KEY_ID && e.BUCKET_SECRET_ACCESS_KEY
      ? {
          endpointUrl: e.BUCKET_ENDPOINT_URL,
          accessKeyId: e.BUCKET_ACCESS_KEY_ID,
          secretAccessKey: e.BUCKET_SECRET_ACCESS_KEY,
          // runlet's own variable (not the platform's): names the bucket outright (docs/s3.md).
          ...(e.BUCKET_NAME === undefined ? {} : { bucketName: e.BUCKET_NAME }),
        }
      : undefined;
  return Object.freeze({
    jobTakeUrl: e.RUNPOD_WEBHOOK_GET_JOB,
    jobDoneUrl: e.RUNPOD_WEBHOOK_POST_OUTPUT,
    jobStreamUrl: e.RUNPOD_WEBHOOK_POST_STREAM,
    pingUrl: e.RUNPOD_WEBHOOK_PING,
    pingIntervalMs: e.RUNPOD_PING_INTERVAL,
    apiKey: e.RUNPOD_AI_API_KEY,
    podId: e.RUNPOD_POD_ID ?? randomUUID(),
    hostname: e.RUNPOD_POD_HOSTNAME ?? "unknown",
    endpointId: e.RUNPOD_ENDPOINT_ID,
    gpuTypeId: e.RUNPOD_GPU_TYPE_ID ?? "unknown",
    logLevel: e.RUNPOD_LOG_LEVEL,
    bucket: bucket === undefined ? undefined : Object.freeze(bucket),
  });
}
