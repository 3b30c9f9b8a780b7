import { randomUUID } from "node:crypto";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { isIP } from "node:net";
import type { Readable } from "node:stream";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { z } from "zod";
import { RunletError } from "../errors.js";
import { onAbort } from "../linked-signal.js";
import { integer, parseOptions } from "../option-schema.js";
import type { Source } from "./download.js";
import { abortReason, createJobTransfers, isHttpUrl } from "./job-transfers.js";
import { MultipartTracker } from "./multipart-tracker.js";
import { endpointRefusedError, guardedLookup, isPrivateAddress } from "./private-address.js";
import { toRequestError } from "./request-error.js";
import { resolveStore, type StoreConfig } from "./store-config.js";
import type {
  DownloadOptions,
  DownloadResult,
  JobS3,
  JobS3Options,
  S3Reference,
  UploadOptions,
} from "./types.js";
import { prepareBody, type UploadBody } from "./upload-body.js";

/** Longest lifetime a SigV4 presigned URL may have. */
export const MAX_PRESIGN_EXPIRES_SEC = 604_800; // 7 days
/** Part size of multipart uploads; bodies up to this size go in one PutObject. */
const PART_SIZE_BYTES = 8 * 1_048_576; // 8 MiB

const optionsSchema = z.object({
  presignExpiresSec: integer(1, MAX_PRESIGN_EXPIRES_SEC, "7 days, the SigV4 maximum").optional(),
});

function checkOptions(options: JobS3Options): void {
  parseOptions(optionsSchema, { presignExpiresSec: options.presignExpiresSec }, "RUNLET_CONFIG_INVALID");
}

/**
 * The request handler of a store whose endpoint the job's sender chose (`s3Config`), unless private
 * addresses are allowed: the endpoint is held to the rule of `ctx.s3.download` URLs (docs/s3.md,
 * "`ctx.s3.download(urlOrKey, options?)`"). A literal private address is refused here; a name is resolved when each
 * connection opens and refused when any of its addresses is private (so a second, different DNS
 * answer cannot slip through). The operator's BUCKET_ENDPOINT_URL is trusted: undefined.
 */
function untrustedEndpoint(
  store: StoreConfig,
  allowPrivate: boolean,
): { httpAgent: HttpAgent; httpsAgent: HttpsAgent } | undefined {
  if (store.source !== "s3Config" || allowPrivate) return undefined;
  const url = new URL(store.endpoint);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0 && isPrivateAddress(host)) throw endpointRefusedError(url, host);
  const lookup = guardedLookup(() => url, endpointRefusedError);
  return {
    httpAgent: new HttpAgent({ keepAlive: true, lookup }),
    httpsAgent: new HttpsAgent({ keepAlive: true, lookup }),
  };
}

/**
 * Binds an S3-compatible store to one job: the job's `s3Config`, else the BUCKET_* default. The
 * client is built on first use; without a store, http(s) URL downloads work (they need no store)
 * and every other use throws RUNLET_S3_NOT_CONFIGURED saying how to configure one.
 *
 * @example
 * const s3 = createJobS3({ jobId, s3Config: job.s3Config, bucket: env.bucket, signal, log });
 * const { url } = await s3.upload(Buffer.from("hi"), { contentType: "text/plain" });
 * await s3.cleanup();
 */
export function createJobS3(options: JobS3Options): JobS3 {
  checkOptions(options);
  const resolution = resolveStore(options);
  const { jobId } = options;
  // The job's downloads and uploads, its temporary folder, and their end when the job ends: its
  // signal aborts at the job's end, and nothing can start after it.
  const transfers = createJobTransfers(options);
  const signal = transfers.signal;
  const tracked = transfers.track;
  const log = options.log.child({ component: "s3" });
  const expiresIn = options.presignExpiresSec ?? MAX_PRESIGN_EXPIRES_SEC;
  const tracker = new MultipartTracker();
  let client: S3Client | undefined;
  let cleanup: Promise<void> | undefined;

  function usedAfterEnd(): RunletError {
    return new RunletError("RUNLET_S3_REQUEST_FAILED", `ctx.s3 was used after job ${jobId} ended`, {
      details: { jobId },
    });
  }

  /** The job's store, or the error saying why there is none. */
  function requireStore(): StoreConfig {
    if (resolution.kind === "none") {
      throw new RunletError("RUNLET_S3_NOT_CONFIGURED", resolution.message, { details: { jobId } });
    }
    if (resolution.kind === "invalid") {
      throw new RunletError("RUNLET_CONFIG_INVALID", resolution.message, { details: { jobId } });
    }
    if (cleanup !== undefined) throw usedAfterEnd();
    return resolution.store;
  }

  /**
   * The store and its client, built on first use: only what talks to the store (upload, a key
   * download) builds it, so a URL download never meets the store's endpoint check.
   */
  function requireClient(): { store: StoreConfig; client: S3Client } {
    const store = requireStore();
    if (client === undefined) {
      const guard = untrustedEndpoint(store, options.allowPrivateAddresses === true);
      client = new S3Client({
        ...(guard === undefined ? {} : { requestHandler: guard }),
        endpoint: store.endpoint,
        region: store.region,
        forcePathStyle: true,
        credentials: { accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
        // Flexible checksums (CRC32 trailers, aws-chunked bodies) are not understood by many
        // S3-compatible stores; send them only where the API requires them.
        requestChecksumCalculation: "WHEN_REQUIRED",
        responseChecksumValidation: "WHEN_REQUIRED",
        maxAttempts: 3,
      });
      tracker.attach(client);
    }
    return { store, client };
  }

  async function presign(c: S3Client, store: StoreConfig, key: string): Promise<string> {
    try {
      return await getSignedUrl(c, new GetObjectCommand({ Bucket: store.bucket, Key: key }), { expiresIn });
    } catch (err) {
      throw toRequestError(err, store, { operation: "presign GetObject", key });
    }
  }

  async function upload(body: UploadBody, opts: UploadOptions = {}): Promise<S3Reference> {
    const { store, client: c } = requireClient();
    signal.throwIfAborted();
    const prepared = await prepareBody(body, opts.contentType);
    const key = opts.key ?? `${jobId}/${randomUUID()}${prepared.extension}`;
    const controller = new AbortController();
    const unlink = onAbort(signal, () => controller.abort(signal.reason));
    const task = new Upload({
      client: c,
      params: {
        Bucket: store.bucket,
        Key: key,
        Body: prepared.body,
        ContentType: prepared.contentType,
        ...(prepared.contentLength === undefined ? {} : { ContentLength: prepared.contentLength }),
      },
      partSize: PART_SIZE_BYTES,
      queueSize: 4,
      abortController: controller,
    });
    try {
      await task.done();
    } catch (err) {
      // Whatever failed, no multipart upload of this object may stay open on the store.
      await tracker.abortOpen(c, log, { bucket: store.bucket, key });
      if (signal.aborted) throw abortReason(signal);
      // A body that failed to read is the caller's problem, not the store's: say so with its own error.
      const fromSource = prepared.sourceError();
      if (fromSource !== undefined) throw fromSource;
      throw toRequestError(err, store, { operation: "upload", key });
    } finally {
      unlink();
      prepared.dispose();
    }
    const bytes = prepared.bytes();
    const url = await presign(c, store, key);
    log.debug({ bucket: store.bucket, key, bytes }, "uploaded an object");
    return Object.freeze({ bucket: store.bucket, key, url, bytes });
  }

  async function openKey(
    c: S3Client,
    store: StoreConfig,
    bucket: string,
    key: string,
    abortSignal: AbortSignal,
  ): Promise<Source> {
    try {
      const res = await c.send(new GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal });
      const stream = res.Body as Readable | undefined;
      if (stream === undefined) throw new Error("the store answered GetObject without a body");
      return { stream, contentLength: res.ContentLength, name: `s3://${bucket}/${key}` };
    } catch (err) {
      if (abortSignal.aborted) throw abortReason(abortSignal);
      throw toRequestError(err, { ...store, bucket }, { operation: "GetObject", key });
    }
  }

  /** A key or `s3://` download: the store's client opens it, the job's transfers deliver it. */
  function downloadKey(bucketOf: (store: StoreConfig) => string, key: string, opts: DownloadOptions) {
    const { store, client: c } = requireClient();
    const bucket = bucketOf(store);
    return transfers.download(
      `s3://${bucket}/${key}`,
      (abortSignal) => openKey(c, store, bucket, key, abortSignal),
      opts,
    );
  }

  async function download(urlOrKey: string, opts: DownloadOptions = {}): Promise<DownloadResult> {
    // A URL needs no store: only the job's end stops it.
    if (isHttpUrl(urlOrKey)) {
      if (cleanup !== undefined) throw usedAfterEnd();
      return transfers.downloadUrl(urlOrKey, opts);
    }
    if (urlOrKey.startsWith("s3://")) {
      const rest = urlOrKey.slice("s3://".length);
      const slash = rest.indexOf("/");
      if (slash <= 0 || slash === rest.length - 1) {
        throw new RunletError(
          "RUNLET_CONFIG_INVALID",
          `an s3:// URL must be s3://<bucket>/<key>, got ${urlOrKey}`,
        );
      }
      return downloadKey(() => rest.slice(0, slash), rest.slice(slash + 1), opts);
    }
    return downloadKey((store) => store.bucket, urlOrKey, opts);
  }

  async function offloadOutput(json: string): Promise<S3Reference> {
    return upload(json, { key: `${jobId}/output.json`, contentType: "application/json" });
  }

  async function runCleanup(): Promise<void> {
    // The job's end aborts what is still downloading or uploading and waits for it, then removes
    // the job's folder (transfers.end()). Every step runs even when one fails: a leftover folder
    // must not hide an open upload.
    await transfers.end();
    if (client !== undefined) {
      await tracker
        .abortOpen(client, log)
        .catch((err: unknown) => log.warn({ err }, "s3 cleanup step failed"));
      client.destroy();
    }
  }

  return Object.freeze({
    configured: resolution.kind === "store",
    upload: (body: UploadBody, opts?: UploadOptions) => tracked(upload(body, opts)),
    download: (urlOrKey: string, opts?: DownloadOptions) => download(urlOrKey, opts),
    offloadOutput: (json: string) => tracked(offloadOutput(json)),
    cleanup: () => {
      cleanup ??= runCleanup();
      return cleanup;
    },
  });
}
