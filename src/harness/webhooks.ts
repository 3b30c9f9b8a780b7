import type { Logger } from "pino";
import { withLinkedSignal } from "../linked-signal.js";
import { USER_AGENT } from "../version.js";
import type { TimerSet } from "./clock.js";

/** Webhook delivery settings (docs/protocol.md, "Webhooks"). */
export interface WebhookOptions {
  /** Attempts after the first failed one. @default 2 */
  readonly retries?: number;
  /** Pause between attempts, ms, on the harness clock. @default 10000 */
  readonly retryDelayMs?: number;
  /** How long one attempt may take, ms (real time). @default 10000 */
  readonly timeoutMs?: number;
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
  readonly #attempts: WebhookAttempt[] = [];
  readonly #closing = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();

  constructor(options: WebhookOptions, timers: TimerSet, logger: Logger | undefined) {
    this.#retries = options.retries ?? 2;
    this.#retryDelayMs = options.retryDelayMs ?? 10_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#timers = timers;
    this.#logger = logger;
  }

  /** Every attempt so far, in order. */
  attempts(): WebhookAttempt[] {
    return [...this.#attempts];
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
      this.#attempts.push({ jobId, url, attempt, outcome, ok, at, ms: Date.now() - at });
      if (ok) return;
      if (attempt <= this.#retries) {
        this.#logger?.warn({ jobId, attempt, outcome }, "webhook delivery failed; retrying");
        this.#timers.set(() => this.#attempt(jobId, url, body, attempt + 1), this.#retryDelayMs);
      } else {
        this.#logger?.warn({ jobId, attempt, outcome }, "webhook delivery failed; giving up");
      }
    })();
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }
}
