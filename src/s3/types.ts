import type { Readable } from "node:stream";
import type { Logger } from "pino";
import type { S3Config } from "../protocol/job.js";

/** Where an uploaded object lives: what `ctx.s3.upload` returns and what an offloaded output becomes. */
export interface S3Reference {
  readonly bucket: string;
  readonly key: string;
  /** A presigned GET URL. */
  readonly url: string;
  readonly bytes: number;
}

/** Options of `ctx.s3.upload`. */
export interface UploadOptions {
  /** Object key. @default `<job id>/<random>` */
  key?: string;
  contentType?: string;
}

/** Options of `ctx.s3.download`. */
export interface DownloadOptions {
  /** `"file"` (a temporary file under the job's folder, removed when the job ends) or `"stream"`. @default "file" */
  to?: "file" | "stream";
  /** Refuse bodies larger than this. @default 1 GiB */
  maxBytes?: number;
  /**
   * Fail the download (RUNLET_S3_DOWNLOAD_TIMEOUT) when it has not finished this many ms after it
   * started, its last byte included (with `to: "stream"`, until the stream is read or closed).
   * @default 600000 (10 min)
   */
  timeoutMs?: number;
}

/** What `ctx.s3.download` resolves to: a file in the job's temporary folder, or a stream. */
export type DownloadResult = { path: string; bytes: number } | { stream: Readable };

/** The S3 store bound to one job (`ctx.s3`). */
export interface JobS3 {
  /**
   * True when a job s3Config or the BUCKET_* environment gives a store. Without one, http(s) URL
   * downloads still work; everything else throws RUNLET_S3_NOT_CONFIGURED.
   */
  readonly configured: boolean;
  /** Uploads a Buffer, a string, a file path (`{ path }`) or a readable stream; multipart when large; abortable by the job's signal. */
  upload(
    body: Buffer | Uint8Array | string | { path: string } | Readable,
    options?: UploadOptions,
  ): Promise<S3Reference>;
  /**
   * Downloads an http(s) URL (store or none), an `s3://<bucket>/<key>` URL or a key of the bound
   * bucket: to a file path (`{ path, bytes }`) or a stream.
   */
  download(urlOrKey: string, options?: DownloadOptions): Promise<DownloadResult>;
  /** Uploads a final output's JSON text and returns its reference (the worker posts `{output: {s3: ref}}`). */
  offloadOutput(json: string): Promise<S3Reference>;
  /** Removes the job's temporary folder; called by the worker when the job ends. */
  cleanup(): Promise<void>;
}

/** What the worker passes to bind a store to one job. */
export interface JobS3Options {
  readonly jobId: string;
  /** The job's s3Config, when it carries one (validated by the S3 module). */
  readonly s3Config: S3Config | undefined;
  /**
   * The BUCKET_* default store. Its bucket is `bucketName` when given, else the first path segment of
   * `endpointUrl` (`https://host/<bucket>`), else the current month as `MM-YY` (the Python SDK's choice).
   */
  readonly bucket:
    | {
        readonly endpointUrl: string;
        readonly accessKeyId: string;
        readonly secretAccessKey: string;
        readonly bucketName?: string | undefined;
      }
    | undefined;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** Presigned URL lifetime. @default 604800 (7 days) */
  readonly presignExpiresSec?: number;
  /** Allow downloads from private and loopback addresses. @default false */
  readonly allowPrivateAddresses?: boolean;
  /** Parent folder for the job's temporary files. @default os.tmpdir() */
  readonly tmpRoot?: string | undefined;
}
