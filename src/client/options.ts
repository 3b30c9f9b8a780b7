import type { Dispatcher } from "undici";
import { callLimitsResolver } from "../call-limits.js";
import { RunletError } from "../errors.js";
import { NETWORK_ERROR_CODES, type RetryPolicy, retryPolicy } from "../retry-policy.js";
import { USER_AGENT } from "../version.js";

/**
 * The job client's retry policy: network errors and 429/502/503/504, with equal jitter; a
 * `Retry-After` is honoured up to the cap. Which calls may be repeated is each call's own flag.
 */
function clientRetryPolicy(limits: Pick<RetryPolicy, "maxRetries" | "baseMs" | "capMs">): RetryPolicy {
  return retryPolicy({
    statuses: new Set([429, 502, 503, 504]),
    refusedStatuses: new Set([429]),
    allServerErrors: false,
    errorCodes: new Set(NETWORK_ERROR_CODES),
    jitter: 0.5,
    longRetryAfter: "cap",
    maxRetryAfterMs: limits.capMs,
    ...limits,
  });
}

/** Options of {@link createClient}. */
export interface ClientOptions {
  /** The API key, sent as `Authorization: Bearer <apiKey>` on every request. */
  readonly apiKey: string;
  /**
   * Where the job API lives: the host (`https://host`, then paths are `/v2/<endpoint>/...`), or
   * the host with its `/v2` prefix (as the official JS client takes it) — both work.
   */
  readonly baseUrl: string;
  /** The undici dispatcher requests go through (a proxy agent, a mock agent). @default undici's global dispatcher */
  readonly dispatcher?: Dispatcher;
  /** How long to wait for an answer's headers and between body bytes, per request, in ms. @default 30_000 */
  readonly requestTimeoutMs?: number;
  /**
   * How many times a failed read is retried: `status`, `health` and `wait`'s polls on a network
   * error, 429, 502, 503 or 504; `stream` reads on 429 only. Writes are never retried. @default 5
   */
  readonly maxRetries?: number;
  /** First back-off bound without `Retry-After`, in ms; it doubles per attempt, with jitter. @default 500 */
  readonly retryBaseMs?: number;
  /** Longest back-off, `Retry-After` included, in ms. @default 30_000 */
  readonly retryCapMs?: number;
  /** The `User-Agent` header. @default runlet's own (`runlet/<version> (node ...)`) */
  readonly userAgent?: string;
}

/** Options after defaults are merged and checked once. */
export interface ResolvedClientOptions {
  readonly apiKey: string;
  /** The job API root ending in `/v2` (no trailing slash). */
  readonly apiRoot: string;
  readonly dispatcher: Dispatcher | undefined;
  readonly requestTimeoutMs: number;
  /** When and how long reads are retried. */
  readonly retry: RetryPolicy;
  readonly userAgent: string;
}

function invalid(message: string): never {
  throw new RunletError("RUNLET_CONFIG_INVALID", message);
}

const limitsOf = callLimitsResolver({
  timeoutName: "requestTimeoutMs",
  timeoutMs: 30_000,
  maxRetries: 5,
  retryBaseMs: 500,
  retryCapMs: 30_000,
});

/** Merges defaults, validates, freezes; bad options fail here with a message naming the option. */
export function resolveClientOptions(options: ClientOptions): ResolvedClientOptions {
  if (typeof options.apiKey !== "string" || options.apiKey === "") {
    invalid("apiKey must be a non-empty string (the endpoint's API key)");
  }
  let base: URL;
  try {
    base = new URL(options.baseUrl);
  } catch (cause) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `baseUrl must be an absolute http(s) URL, got ${JSON.stringify(options.baseUrl)}`,
      { cause },
    );
  }
  if (base.protocol !== "http:" && base.protocol !== "https:") {
    invalid(`baseUrl must be an http(s) URL, got ${base.protocol}`);
  }
  const path = base.pathname.replace(/\/+$/, "");
  const apiRoot = `${base.origin}${path.endsWith("/v2") ? path : `${path}/v2`}`;
  const limits = limitsOf(options);
  return Object.freeze({
    apiKey: options.apiKey,
    apiRoot,
    dispatcher: options.dispatcher,
    requestTimeoutMs: limits.timeoutMs,
    retry: clientRetryPolicy(limits.retry),
    userAgent: options.userAgent ?? USER_AGENT,
  });
}
