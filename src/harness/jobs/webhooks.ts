import type { Logger } from "pino";
import { withLinkedSignal } from "../../linked-signal.js";
import { settle } from "../../task-sink.js";
import { USER_AGENT } from "../../version.js";
import type { TimerSet } from "../clock.js";

/** Webhook delivery settings (docs/protocol.md, "Webhooks"). */
export interface WebhookOptions {
  /** Attempts after the first failed one. @default 2 */
  readonly retries?: number;
  /** Pause between attempts, ms, on the harness clock. @default 10000 */
  readonly retryDelayMs?: number;
  /** How long one attempt may take, ms (real time). @default 10000 */
  readonly timeoutMs?: number;
}

/**
 * The longest webhook URL a job may carry, bytes (docs/harness.md, "Limits and rate limits"): a
 * longer one is refused with 400 naming this limit. Real receivers' URLs, tokens and all, are far
 * shorter; HTTP servers commonly refuse request lines over 8 KiB.
 */
export const MAX_WEBHOOK_URL_BYTES = 8_192;
/** Most delivery attempts kept for `Harness.webhookAttempts()`; the oldest go first. */
export const MAX_WEBHOOK_ATTEMPTS = 1_000;
/** Most bytes the kept attempts are counted as; the oldest go first. */
export const MAX_WEBHOOK_ATTEMPT_BYTES = 1_048_576;
/** Bytes counted for an attempt besides its strings. */
const ATTEMPT_OVERHEAD_BYTES = 100;
/** Longest error message kept as an attempt's outcome. */
const MAX_OUTCOME_CHARS = 500;

/** The message refusing a webhook URL over {@link MAX_WEBHOOK_URL_BYTES}, or undefined when it fits. */
export function webhookUrlProblem(url: string): string | undefined {
  const bytes = Buffer.byteLength(url);
  if (bytes <= MAX_WEBHOOK_URL_BYTES) return undefined;
  return `webhook is ${bytes} bytes, over the limit of ${MAX_WEBHOOK_URL_BYTES} bytes for a webhook URL`;
}

/** One delivery attempt, for tests and tools (`Harness.webhookAttempts`). */
export interface WebhookAttempt {
  readonly jobId: string;
  readonly url: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The receiver's status, or the network error's message. */
  readonly outcome: number | string;
  readonly ok: boolean;
  /** When the attempt started (epoch ms, real time) and how long it took: the dashboard's timeline. */
  readonly at?: number;
  readonly ms?: number;
}

/**
 * POSTs a job's final record to its webhook. A network error or any answer other than 2xx is a
 * failure; failures are retried `retries` more times, `retryDelayMs` apart on the harness clock.
 */
export class WebhookSender {
  readonly #retries: number;
  readonly #retryDelayMs: number;
  readonly #timeoutMs: number;
  readonly #timers: TimerSet;
  readonly #logger: Logger | undefined;
  /** Kept attempts, oldest first, with the bytes each is counted as. */
  readonly #attempts: Array<{ readonly attempt: WebhookAttempt; readonly bytes: number }> = [];
  #attemptBytes = 0;
  readonly #closing = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();

  constructor(options: WebhookOptions, timers: TimerSet, logger: Logger | undefined) {
    this.#retries = options.retries ?? 2;
    this.#retryDelayMs = options.retryDelayMs ?? 10_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#timers = timers;
    this.#logger = logger;
  }

  /** The attempts kept (the latest {@link MAX_WEBHOOK_ATTEMPTS}, within {@link MAX_WEBHOOK_ATTEMPT_BYTES}), in order. */
  attempts(): WebhookAttempt[] {
    return this.#attempts.map((a) => a.attempt);
  }

  /** How many attempts are kept and the bytes they are counted as (`Harness.memory()`). */
  get size(): { readonly records: number; readonly bytes: number } {
    return { records: this.#attempts.length, bytes: this.#attemptBytes };
  }

  #record(attempt: WebhookAttempt): void {
    const bytes =
      ATTEMPT_OVERHEAD_BYTES +
      attempt.jobId.length +
      attempt.url.length +
      (typeof attempt.outcome === "string" ? attempt.outcome.length : 0);
    this.#attempts.push({ attempt, bytes });
    this.#attemptBytes += bytes;
    while (
      this.#attempts.length > MAX_WEBHOOK_ATTEMPTS ||
      (this.#attemptBytes > MAX_WEBHOOK_ATTEMPT_BYTES && this.#attempts.length > 1)
    ) {
      const dropped = this.#attempts.shift();
      this.#attemptBytes -= dropped?.bytes ?? 0;
    }
  }

  /** Starts delivering `record` to `url` (does not wait). */
  send(jobId: string, url: string, record: unknown): void {
    this.#attempt(jobId, url, JSON.stringify(record), 1);
  }

  /** Stops retrying and aborts attempts in flight. */
  async close(): Promise<void> {
    this.#closing.abort();
    await Promise.allSettled([...this.#inFlight]);
  }

  #attempt(jobId: string, url: string, body: string, attempt: number): void {
    if (this.#closing.signal.aborted) return;
    const run = (async () => {
      const at = Date.now();
      let outcome: number | string;
      try {
        // Linked by one listener removed when the attempt ends: AbortSignal.any with the harness's
        // long-lived closing signal leaves an entry per call in it on Node 20 (nodejs/node#55351).
        outcome = await withLinkedSignal(this.#closing.signal, this.#timeoutMs, async (signal) => {
          const res = await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", "user-agent": USER_AGENT },
            body,
            signal,
          });
          // The body is not used; reading it frees the connection.
          await res.arrayBuffer().catch(() => undefined);
          return res.status;
        });
      } catch (err) {
        outcome = err instanceof Error ? err.message : String(err);
      }
      if (this.#closing.signal.aborted) return;
      const ok = typeof outcome === "number" && outcome >= 200 && outcome < 300;
      if (typeof outcome === "string") outcome = outcome.slice(0, MAX_OUTCOME_CHARS);
      this.#record({ jobId, url, attempt, outcome, ok, at, ms: Date.now() - at });
      if (ok) return;
      if (attempt <= this.#retries) {
        this.#logger?.warn({ jobId, attempt, outcome }, "webhook delivery failed; retrying");
        this.#timers.set(() => this.#attempt(jobId, url, body, attempt + 1), this.#retryDelayMs);
      } else {
        this.#logger?.warn({ jobId, attempt, outcome }, "webhook delivery failed; giving up");
      }
    })();
    this.#inFlight.add(run);
    settle(
      run.finally(() => this.#inFlight.delete(run)),
      (err) => this.#logger?.error({ err, jobId }, "webhook delivery failed"),
    );
  }
}
