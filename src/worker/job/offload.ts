import type { Logger } from "pino";
import type { JobResult } from "../../handler/outcome.js";
import { s3LoadError } from "../../optional-peers.js";
import type { DeliveredJob } from "../../protocol/index.js";
import type { JobS3, JobS3Options } from "../../s3/types.js";
import type { WorkerConfig } from "../config.js";
import type { S3Settings } from "../runner/runner.js";

/**
 * A final output too large to post (over `maxResultBytes`) goes to S3 when the job or the endpoint
 * names a store, and the job's result becomes `{"s3": <reference>}`; otherwise the job fails
 * saying so. The S3 module (and the AWS SDK behind it) is loaded only then.
 */

/** What offloading reads from the worker. */
export interface OffloadDeps {
  /** `maxResultBytes` and the endpoint's BUCKET_* store. */
  readonly config: WorkerConfig;
  /** Aborted at the shutdown flush deadline: ends the upload (and a job's every retry). */
  readonly giveUp: AbortSignal;
  /** ctx.s3's settings, which the offload store uses too. */
  readonly s3: S3Settings;
}

/** `result` as it can be posted: unchanged when it fits, its output offloaded to S3, or an error saying why not. */
export async function fitResult(
  result: JobResult,
  job: DeliveredJob,
  deps: OffloadDeps,
  log: Logger,
): Promise<JobResult> {
  if (result.kind !== "output") return result;
  const bytes = Buffer.byteLength(result.json);
  const limit = deps.config.maxResultBytes;
  if (bytes <= limit) return result;
  let s3: JobS3 | undefined;
  try {
    s3 = await createOffloadStore(job, deps, log);
    if (s3?.configured) {
      const ref = await s3.offloadOutput(result.json);
      log.info({ bytes, key: ref.key }, "the output was too large to post; offloaded it to S3");
      return { ...result, json: JSON.stringify({ s3: ref }) };
    }
  } catch (err) {
    return {
      kind: "error",
      message: `the output is ${bytes} bytes, over the ${limit}-byte limit, and offloading it to S3 failed: ${(err as Error).message}`,
      code: "RUNLET_OUTPUT_TOO_LARGE",
      stopPod: result.stopPod,
    };
  } finally {
    await s3?.cleanup().catch((err: unknown) => log.warn({ err }, "S3 cleanup failed"));
  }
  return {
    kind: "error",
    message: `the output is ${bytes} bytes, over the ${limit}-byte limit for a result, and no S3 store is configured to offload it (send s3Config with the job, or set BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint)`,
    code: "RUNLET_OUTPUT_TOO_LARGE",
    stopPod: result.stopPod,
  };
}

async function createOffloadStore(
  job: DeliveredJob,
  deps: OffloadDeps,
  log: Logger,
): Promise<JobS3 | undefined> {
  if (job.s3Config === undefined && deps.config.bucket === undefined) return undefined;
  // Loaded here, lazily: the AWS SDK is paid for only when an output is too large.
  const { createJobS3 } = await import("../../s3/index.js").catch((err: unknown) => {
    throw s3LoadError(err);
  });
  return createJobS3({
    jobId: job.id,
    s3Config: job.s3Config as JobS3Options["s3Config"],
    bucket: deps.config.bucket,
    signal: deps.giveUp,
    log,
    ...deps.s3,
  });
}
