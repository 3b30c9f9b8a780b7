import { z } from "zod";
import { RunletError } from "./errors.js";
import { PLATFORM_ENV } from "./protocol/env.js";

/**
 * The environment the platform injects into a worker (docs/protocol.md, "Environment"), parsed once and frozen.
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

/** What a RUNPOD_PING_INTERVAL that is not a finite number is refused with. */
const PING_INTERVAL_NAN = "RUNPOD_PING_INTERVAL must be a number of ms";
const PING_INTERVAL_INFINITE = "RUNPOD_PING_INTERVAL must be finite";

const envSchema = z.object({
  [PLATFORM_ENV.jobTakeUrl]: optionalUrl,
  [PLATFORM_ENV.jobDoneUrl]: optionalUrl,
  [PLATFORM_ENV.jobStreamUrl]: optionalUrl,
  [PLATFORM_ENV.pingUrl]: optionalUrl,
  // The platform's own worker accepts any number here, so a value off the integer grid or out of
  // range is rounded and clamped (with a warning), not fatal; only a non-number is refused.
  [PLATFORM_ENV.pingInterval]: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === "" ? 10_000 : Number(v)))
    .pipe(z.number(PING_INTERVAL_NAN).finite(PING_INTERVAL_INFINITE)),
  [PLATFORM_ENV.apiKey]: optionalString,
  [PLATFORM_ENV.podId]: optionalString,
  [PLATFORM_ENV.hostname]: optionalString,
  [PLATFORM_ENV.endpointId]: optionalString,
  [PLATFORM_ENV.gpuTypeId]: optionalString,
  [PLATFORM_ENV.logLevel]: optionalString,
  [PLATFORM_ENV.debugLevel]: optionalString,
  BUCKET_ENDPOINT_URL: optionalUrl,
  BUCKET_ACCESS_KEY_ID: optionalString,
  BUCKET_SECRET_ACCESS_KEY: optionalString,
  BUCKET_NAME: optionalString,
});

/** Ping interval bounds: below 100 ms the heartbeat would flood the platform; above 10 min it would be declared dead. */
const PING_INTERVAL_MS = { min: 100, max: 600_000 } as const;

type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

/** Level names the platform's own worker accepts (Python's), and pino's, mapped to pino's. */
const LOG_LEVELS: Readonly<Record<string, LogLevel>> = {
  notset: "trace",
  trace: "trace",
  debug: "debug",
  info: "info",
  warn: "warn",
  warning: "warn",
  error: "error",
  critical: "fatal",
  fatal: "fatal",
  silent: "silent",
};

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
  /**
   * False when RUNPOD_POD_ID was not set and `podId` was made up: the worker is not running on the
   * platform, so it sends no heartbeat (as the platform's Python SDK does; docs/worker.md).
   */
  readonly onPlatformPod: boolean;
  /** Host name for error reports. @default "unknown" */
  readonly hostname: string;
  /** Endpoint id; when set, logs are JSON lines. */
  readonly endpointId: string | undefined;
  /** GPU type, substituted into templates. @default "unknown" */
  readonly gpuTypeId: string;
  /** Log level, from `RUNPOD_LOG_LEVEL` (else `RUNPOD_DEBUG_LEVEL`); Python's names are accepted. @default "info" */
  readonly logLevel: LogLevel;
  /** Default S3-compatible store when a job carries no s3Config (`bucketName` from the optional BUCKET_NAME). */
  readonly bucket:
    | {
        readonly endpointUrl: string;
        readonly accessKeyId: string;
        readonly secretAccessKey: string;
        readonly bucketName?: string | undefined;
      }
    | undefined;
  /** Values that were adjusted rather than refused (the worker logs each at start). */
  readonly warnings: readonly string[];
}

/** Parses the platform's variables from `env`; a bad value throws RUNLET_CONFIG_INVALID naming it. */
export function readPlatformEnv(env: Readonly<Record<string, string | undefined>>): PlatformEnv {
  // Parsed once: zod compiling a fast path for the object (its JIT) would cost more than it saves.
  const parsed = envSchema.safeParse(env, { jitless: true });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new RunletError("RUNLET_CONFIG_INVALID", `bad environment: ${problems.join("; ")}`, {
      details: { issues: problems },
    });
  }
  const e = parsed.data;
  const warnings: string[] = [];
  const rounded = Math.round(e[PLATFORM_ENV.pingInterval]);
  const pingIntervalMs = Math.min(PING_INTERVAL_MS.max, Math.max(PING_INTERVAL_MS.min, rounded));
  if (pingIntervalMs !== e[PLATFORM_ENV.pingInterval]) {
    warnings.push(
      `RUNPOD_PING_INTERVAL=${e[PLATFORM_ENV.pingInterval]} adjusted to ${pingIntervalMs} ms (an integer from ${PING_INTERVAL_MS.min} to ${PING_INTERVAL_MS.max})`,
    );
  }
  const levelName = e[PLATFORM_ENV.logLevel] ?? e[PLATFORM_ENV.debugLevel];
  let logLevel: LogLevel = "info";
  if (levelName !== undefined) {
    const known = LOG_LEVELS[levelName.toLowerCase()];
    if (known === undefined) {
      warnings.push(
        `log level "${levelName}" is unknown; using info (known: ${Object.keys(LOG_LEVELS).join(", ")})`,
      );
    } else logLevel = known;
  }
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
    jobTakeUrl: e[PLATFORM_ENV.jobTakeUrl],
    jobDoneUrl: e[PLATFORM_ENV.jobDoneUrl],
    jobStreamUrl: e[PLATFORM_ENV.jobStreamUrl],
    pingUrl: e[PLATFORM_ENV.pingUrl],
    pingIntervalMs,
    apiKey: e[PLATFORM_ENV.apiKey],
    // Web Crypto's global, not node:crypto: that module is not loaded with the worker (docs/benchmarks.md, "Cold start").
    podId: e[PLATFORM_ENV.podId] ?? globalThis.crypto.randomUUID(),
    onPlatformPod: e[PLATFORM_ENV.podId] !== undefined,
    hostname: e[PLATFORM_ENV.hostname] ?? "unknown",
    endpointId: e[PLATFORM_ENV.endpointId],
    gpuTypeId: e[PLATFORM_ENV.gpuTypeId] ?? "unknown",
    logLevel,
    bucket: bucket === undefined ? undefined : Object.freeze(bucket),
    warnings: Object.freeze(warnings),
  });
}
