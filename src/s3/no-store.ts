import { RunletError } from "../errors.js";
import {
  createJobTransfers,
  isHttpUrl,
  type JobTransfers,
  type JobTransfersOptions,
} from "./job-transfers.js";
import type { DownloadOptions, DownloadResult, JobS3 } from "./types.js";

/**
 * The "no store" case of ctx.s3, in a file with no AWS SDK behind it: the worker binds jobs that
 * have no store to {@link unconfiguredJobS3} without loading the S3 module, and the S3 module says
 * the same words when it resolves no store, so a user sees one message whichever side noticed.
 * An http(s) URL needs no store: those downloads run here too (job-transfers.ts, which loads the
 * HTTP client only when one starts).
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

/**
 * ctx.s3 of a job with neither s3Config nor BUCKET_*: `configured` is false, an http(s) URL
 * downloads as with a store (the private-address guard, `maxBytes`, `timeoutMs`, the job's
 * temporary folder), and every other use throws {@link noStoreError}.
 */
export function unconfiguredJobS3(options: JobTransfersOptions): JobS3 {
  const refuse = async (): Promise<never> => {
    throw noStoreError(options.jobId);
  };
  // Made on the first URL download: a job that never downloads links nothing to its signal.
  let transfers: JobTransfers | undefined;
  let ended = false;
  return Object.freeze({
    configured: false,
    upload: refuse,
    async download(urlOrKey: string, opts?: DownloadOptions): Promise<DownloadResult> {
      if (!isHttpUrl(urlOrKey)) throw noStoreError(options.jobId);
      if (ended) {
        throw new RunletError(
          "RUNLET_S3_REQUEST_FAILED",
          `ctx.s3 was used after job ${options.jobId} ended`,
          {
            details: { jobId: options.jobId },
          },
        );
      }
      transfers ??= createJobTransfers(options);
      return transfers.downloadUrl(urlOrKey, opts);
    },
    offloadOutput: refuse,
    cleanup: async () => {
      ended = true;
      await transfers?.end();
    },
  });
}
