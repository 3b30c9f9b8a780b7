/** The platform's limits (docs/protocol.md, "Limits"), in one place for worker, harness and client. */

/** A streamed chunk, as posted, is at most this many bytes of JSON. */
export const MAX_STREAM_CHUNK_BYTES = 1_048_576; // 1 MiB
/** Largest `/run` request body. */
export const MAX_RUN_PAYLOAD_BYTES = 10 * 1_048_576; // 10 MiB
/** Largest `/runsync` request body. */
export const MAX_RUNSYNC_PAYLOAD_BYTES = 20 * 1_048_576; // 20 MiB
/** Default size above which a final output is offloaded to S3 (or fails) instead of being posted. */
export const DEFAULT_MAX_RESULT_BYTES = 10 * 1_048_576; // 10 MiB

/** `/runsync?wait=` bounds and default, in ms. */
export const RUNSYNC_WAIT_MS = { min: 1_000, max: 300_000, default: 90_000 } as const;
/** `policy.executionTimeout` bounds and default, in ms. */
export const EXECUTION_TIMEOUT_MS = { min: 5_000, max: 7 * 86_400_000, default: 600_000 } as const;
/** `policy.ttl` bounds and default, in ms. */
export const TTL_MS = { min: 10_000, max: 7 * 86_400_000, default: 86_400_000 } as const;
/** Result retention after completion, in ms: `/run` jobs, and `/runsync` jobs (extendable by `wait`). */
export const RETENTION_MS = { run: 30 * 60_000, runsync: 60_000, runsyncMax: 5 * 60_000 } as const;

/**
 * Load-balancing endpoints (docs/load-balancing.md): how long a request waits for a worker (2 min),
 * a request's processing limit (5.5 min), the request and answer size limit (30 MB, read as MiB),
 * the worker's port when `PORT` is not set, and the health path when `HEALTH_CHECK_PATH` is not.
 * test/lb/platform-contract.test.ts holds them to the platform's published page.
 */
export const LOAD_BALANCER = {
  waitMs: 120_000,
  maxRequestMs: 330_000,
  maxBodyBytes: 30 * 1_048_576,
  defaultPort: 80,
  healthPath: "/ping",
} as const;

/** One rate-limit rule: requests per 10 s window and concurrent requests (null: not applicable). */
export interface RateLimitRule {
  readonly perWindow: number;
  readonly concurrent: number | null;
}

/** Rate limits per endpoint and operation (docs/protocol.md, "Rate limits"); the window is 10 s. */
export const RATE_LIMITS = {
  runsync: { perWindow: 2000, concurrent: 400 },
  run: { perWindow: 1000, concurrent: 200 },
  status: { perWindow: 2000, concurrent: 400 },
  stream: { perWindow: 2000, concurrent: 400 },
  cancel: { perWindow: 100, concurrent: 20 },
  "purge-queue": { perWindow: 2, concurrent: null },
  openai: { perWindow: 2000, concurrent: 400 },
  requests: { perWindow: 10, concurrent: 2 },
} as const satisfies Readonly<Record<string, RateLimitRule>>;
/** A row of {@link RATE_LIMITS}: the operations the platform limits. */
export type RateOperation = keyof typeof RATE_LIMITS;
/** The rate-limit window, in ms. */
export const RATE_LIMIT_WINDOW_MS = 10_000;
