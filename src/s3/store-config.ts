import { z } from "zod";
import { NO_STORE_MESSAGE } from "./no-store.js";
import type { JobS3Options } from "./types.js";

/** Where one job's objects go: everything needed to build an S3 client, resolved once. */
export interface StoreConfig {
  /** Base URL of the S3 API (no bucket in it: requests are path-style). */
  readonly endpoint: string;
  readonly region: string;
  readonly bucket: string;
  readonly accessKeyId: string;
  /** Never put this in a message, a log line or `details`. */
  readonly secretAccessKey: string;
  /** Which configuration gave the store, for messages. */
  readonly source: "s3Config" | "env";
}

/** The outcome of resolving a job's store: a store, none at all, or a configuration that cannot work. */
export type StoreResolution =
  | { readonly kind: "store"; readonly store: StoreConfig }
  | { readonly kind: "none"; readonly message: string }
  | { readonly kind: "invalid"; readonly message: string };

const nonEmpty = (field: string) => z.string().trim().min(1, `s3Config.${field} must be a non-empty string`);
const jobS3ConfigSchema = z.object({
  accessId: nonEmpty("accessId"),
  accessSecret: nonEmpty("accessSecret"),
  bucketName: nonEmpty("bucketName"),
  endpointUrl: nonEmpty("endpointUrl"),
});

// One wording for "no store", shared with the worker's SDK-free ctx.s3 (no-store.ts).
export { HOW_TO_CONFIGURE } from "./no-store.js";

// An AWS-style region label: eu-west-1, us-gov-west-1, ap-southeast-2, us-west-004 (Backblaze).
const REGION_LABEL = /^[a-z]{2}(?:-[a-z]+)+-\d+$/;

/**
 * The signing region named by an endpoint's host: `s3.eu-west-1.amazonaws.com` → `eu-west-1`,
 * `nyc3.digitaloceanspaces.com` → `nyc3`; `us-east-1` when the host names none (MinIO, R2, s3rver
 * accept it).
 */
export function regionFromEndpoint(endpointUrl: string): string {
  let host: string;
  try {
    host = new URL(endpointUrl).hostname.toLowerCase();
  } catch {
    // Unparsable URLs are rejected elsewhere with a message naming the field; the region is moot.
    return "us-east-1";
  }
  const labels = host.split(".");
  if (host.endsWith(".digitaloceanspaces.com") && labels.length >= 3) {
    return labels[labels.length - 3] ?? "us-east-1";
  }
  return labels.find((label) => REGION_LABEL.test(label)) ?? "us-east-1";
}

/** Parses an http(s) URL or returns a message naming `what`. */
function parseHttpUrl(value: string, what: string): URL | string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${what} must be an http(s) URL, got ${JSON.stringify(value)}`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `${what} must be an http(s) URL, got ${JSON.stringify(value)}`;
  }
  return url;
}

/** The URL's segments, without empty ones. */
function segments(url: URL): string[] {
  return url.pathname.split("/").filter((s) => s !== "");
}

/**
 * The bucket of the BUCKET_* store. The platform's Python SDK takes the bucket from its caller and,
 * for its default upload helper, uses the current month as `MM-YY`; it never reads a bucket
 * variable. runlet takes, in order: an explicit `bucketName`, the first path segment of
 * BUCKET_ENDPOINT_URL (`https://host/my-bucket`), else the Python SDK's `MM-YY` (UTC) so that
 * endpoints moving from it keep writing where they did.
 */
export function envBucketName(endpoint: URL, explicit: string | undefined, now: Date): string {
  if (explicit !== undefined && explicit.trim() !== "") return explicit.trim();
  const first = segments(endpoint)[0];
  if (first !== undefined) return decodeURIComponent(first);
  const mm = String(now.getUTCMonth() + 1).padStart(2, "0");
  const yy = String(now.getUTCFullYear() % 100).padStart(2, "0");
  return `${mm}-${yy}`;
}

/**
 * Resolves the store of one job: the job's `s3Config` wins over the BUCKET_* default; a malformed
 * `s3Config` is an error rather than a silent fall-back to the default store.
 */
export function resolveStore(options: JobS3Options, now: Date = new Date()): StoreResolution {
  if (options.s3Config !== undefined && options.s3Config !== null) {
    const parsed = jobS3ConfigSchema.safeParse(options.s3Config);
    if (!parsed.success) {
      // Issue messages name fields only; zod does not echo string values for these checks.
      const problems = parsed.error.issues.map((i) =>
        i.code === "invalid_type" ? `s3Config.${i.path.join(".")} must be a string` : i.message,
      );
      return { kind: "invalid", message: `the job's s3Config is invalid: ${problems.join("; ")}` };
    }
    const c = parsed.data;
    const url = parseHttpUrl(c.endpointUrl, "s3Config.endpointUrl");
    if (typeof url === "string") return { kind: "invalid", message: `the job's s3Config is invalid: ${url}` };
    // Users often paste the bucket's own URL (`https://host/<bucket>`): requests are path-style, so
    // the bucket segment must not be doubled.
    const path = segments(url);
    const endpoint =
      path.length === 0 || (path.length === 1 && decodeURIComponent(path[0] ?? "") === c.bucketName)
        ? url.origin
        : `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
    return {
      kind: "store",
      store: Object.freeze({
        endpoint,
        region: regionFromEndpoint(c.endpointUrl),
        bucket: c.bucketName,
        accessKeyId: c.accessId,
        secretAccessKey: c.accessSecret,
        source: "s3Config" as const,
      }),
    };
  }
  const env = options.bucket;
  if (env === undefined) {
    return { kind: "none", message: NO_STORE_MESSAGE };
  }
  const url = parseHttpUrl(env.endpointUrl, "BUCKET_ENDPOINT_URL");
  if (typeof url === "string") return { kind: "invalid", message: url };
  return {
    kind: "store",
    store: Object.freeze({
      endpoint: url.origin,
      region: regionFromEndpoint(env.endpointUrl),
      bucket: envBucketName(url, env.bucketName, now),
      accessKeyId: env.accessKeyId,
      secretAccessKey: env.secretAccessKey,
      source: "env" as const,
    }),
  };
}
