import { RunletError } from "../errors.js";
import type { JobS3 } from "./types.js";

/**
 * The "no store" case of ctx.s3, in a file with no AWS SDK behind it: the worker binds jobs that
 * have no store to {@link unconfiguredJobS3} without loading the S3 module, and the S3 module says
 * the same words when it resolves no store, so a user sees one message whichever side noticed.
 */

/** How to give a job a store; ends every RUNLET_S3_NOT_CONFIGURED message. */
export const HOW_TO_CONFIGURE =
  "send the job with s3Config {accessId, accessSecret, bucketName, endpointUrl}, or set " +
  "BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint";

/** The message of RUNLET_S3_NOT_CONFIGURED. */
export const NO_STORE_MESSAGE = `ctx.s3 has no store: ${HOW_TO_CONFIGURE}`;

/** The error every use of an unconfigured ctx.s3 throws. */
export function noStoreError(jobId: string): RunletError {
  return new RunletError("RUNLET_S3_NOT_CONFIGURED", NO_STORE_MESSAGE, { details: { jobId } });
}

/** ctx.s3 of a job with neither s3Config nor BUCKET_*: `configured` is false and every use throws {@link noStoreError}. */
export function unconfiguredJobS3(jobId: string): JobS3 {
  const refuse = async (): Promise<never> => {
    throw noStoreError(jobId);
  };
  return Object.freeze({
    configured: false,
    upload: refuse,
    download: refuse,
    offloadOutput: refuse,
    cleanup: async () => {},
  });
}
