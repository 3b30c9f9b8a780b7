export { createJobS3, MAX_PRESIGN_EXPIRES_SEC } from "./job-s3.js";
export {
  createJobTransfers,
  DEFAULT_DOWNLOAD_TIMEOUT_MS,
  DEFAULT_MAX_DOWNLOAD_BYTES,
  type JobTransfers,
  type JobTransfersOptions,
} from "./job-transfers.js";
export { isPrivateAddress } from "./private-address.js";
export {
  envBucketName,
  regionFromEndpoint,
  resolveStore,
  type StoreConfig,
  type StoreResolution,
} from "./store-config.js";
export type {
  DownloadOptions,
  DownloadResult,
  JobS3,
  JobS3Options,
  S3Reference,
  UploadOptions,
} from "./types.js";
export type { UploadBody } from "./upload-body.js";
