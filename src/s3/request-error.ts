import { RunletError } from "../errors.js";
import type { StoreConfig } from "./store-config.js";

/** What was being done when the store failed, for the message. */
export interface RequestContext {
  /** S3 operation, e.g. "PutObject", "GetObject", "upload". */
  readonly operation: string;
  readonly key?: string | undefined;
}

interface SdkErrorShape {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  Code?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

const CREDENTIAL_CODES = new Set([
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "InvalidToken",
  "ExpiredToken",
  "InvalidSecurity",
  "AuthorizationHeaderMalformed",
]);
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
]);

/** A RUNLET_S3_ENDPOINT_REFUSED error in `err`'s cause chain (the SDK wraps socket errors). */
function refusedInChain(err: unknown): RunletError | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && typeof e === "object" && e !== null; i++) {
    if (e instanceof RunletError && e.code === "RUNLET_S3_ENDPOINT_REFUSED") return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Replaces every occurrence of the secret in `text`: stores sometimes echo request material. */
export function scrub(text: string, secret: string): string {
  return secret.length > 0 ? text.replaceAll(secret, "[redacted]") : text;
}

/** The store's error code (`NoSuchBucket`, ...) and HTTP status, when the failure came from the store. */
function describe(err: unknown): { storeCode: string | undefined; status: number | undefined; text: string } {
  if (typeof err !== "object" || err === null)
    return { storeCode: undefined, status: undefined, text: String(err) };
  const e = err as SdkErrorShape;
  const status = typeof e.$metadata?.httpStatusCode === "number" ? e.$metadata.httpStatusCode : undefined;
  const rawCode = [e.Code, e.code, e.name].find((v) => typeof v === "string" && v !== "Error") as
    | string
    | undefined;
  const text = typeof e.message === "string" ? e.message : String(err);
  return { storeCode: rawCode, status, text };
}

/**
 * Turns a failure of the store (or of the way to it) into RUNLET_S3_REQUEST_FAILED with a message a
 * user can act on. The message and `details` name the endpoint, bucket and access id, never the
 * secret; the original error stays as `cause`.
 */
export function toRequestError(err: unknown, store: StoreConfig, ctx: RequestContext): RunletError {
  // A refused endpoint (a job's s3Config on a private address) surfaces as a socket error: say so.
  const refused = refusedInChain(err);
  if (refused !== undefined) return refused;
  const { storeCode, status, text } = describe(err);
  const where = `the store at ${store.endpoint}`;
  const object =
    ctx.key === undefined ? `bucket "${store.bucket}"` : `"${ctx.key}" in bucket "${store.bucket}"`;
  let message: string;
  if (storeCode !== undefined && CREDENTIAL_CODES.has(storeCode)) {
    message =
      `${where} rejected the credentials of access id "${store.accessKeyId}" (${storeCode}) on ${ctx.operation}: ` +
      `check ${store.source === "s3Config" ? "s3Config.accessId and s3Config.accessSecret" : "BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY"}`;
  } else if (storeCode === "AccessDenied" || status === 403) {
    message = `${where} denied access id "${store.accessKeyId}" permission for ${ctx.operation} on ${object} (${storeCode ?? status}): grant it that permission`;
  } else if (storeCode === "NoSuchBucket") {
    message =
      `${where} has no bucket "${store.bucket}"` +
      (store.source === "env"
        ? ": create it, or put the bucket in BUCKET_ENDPOINT_URL as its first path segment (https://host/<bucket>)"
        : ": create it, or fix s3Config.bucketName");
  } else if (storeCode === "NoSuchKey" || (status === 404 && ctx.key !== undefined)) {
    message = `${where} has no object ${object}`;
  } else if (storeCode !== undefined && NETWORK_CODES.has(storeCode)) {
    message = `could not reach ${where} (${storeCode}) on ${ctx.operation}: check the endpoint URL and the network`;
  } else {
    const answer =
      status === undefined ? (storeCode ?? "an error") : `${status}${storeCode ? ` ${storeCode}` : ""}`;
    message = `${where} failed ${ctx.operation} on ${object} with ${answer}: ${text}`;
  }
  return new RunletError("RUNLET_S3_REQUEST_FAILED", scrub(message, store.secretAccessKey), {
    cause: err,
    details: {
      operation: ctx.operation,
      endpoint: store.endpoint,
      bucket: store.bucket,
      ...(ctx.key === undefined ? {} : { key: ctx.key }),
      accessId: store.accessKeyId,
      ...(status === undefined ? {} : { status }),
      ...(storeCode === undefined ? {} : { storeCode }),
    },
  });
}
