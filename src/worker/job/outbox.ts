import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import { RunletError } from "../../errors.js";
import { Fifo } from "../../fifo.js";
import { onAbort } from "../../linked-signal.js";
import { nextRetry, type RetryPolicy } from "../../retry-policy.js";
import { sendWithRetry } from "../../send-with-retry.js";
import { settle } from "../../task-sink.js";
import { WaiterSet } from "../../wait.js";
import type { WorkerEventHub } from "../events.js";
import { isRefusedRequest, type PlatformHttp } from "../platform/platform-http.js";

/**
 * One job's ordered outbox (docs/architecture.md, "Decisions", item 2): progress, stream chunks, then the final
 * result, posted one at a time in order. Network errors, 429 and 5xx are retried with capped,
 * jittered back-off (Retry-After honoured) until the worker's give-up signal fires; a 4xx is final.
 */

/** A queued post. */
interface Entry {
  readonly kind: "progress" | "chunk" | "final";
  readonly url: string;
  /** JSON text, or its UTF-8 bytes (a large item's chunk, built once: chunkBody in stream/split.ts). */
  readonly body: string | Uint8Array;
  readonly bytes: number;
  /** Names the entry in messages: "progress update 2", "stream chunk 5". */
  readonly label: string;
  readonly stopPod: boolean;
}

/** How a job's final post ended. */
export type FinalDelivery = "delivered" | "replaced" | "rejected" | "gave-up" | "discarded";

/** Options of {@link JobOutbox}. */
export interface JobOutboxOptions {
  readonly jobId: string;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Aborting it ends all retrying (the shutdown flush deadline). */
  readonly giveUp: AbortSignal;
  /** Times the back-off between retries. */
  readonly clock: Clock;
  /** When and how long posts are retried (postRetryPolicy). */
  readonly retry: RetryPolicy;
  /** Receives a `retrying` event before each wait. */
  readonly events?: WorkerEventHub;
}

/** A post whose answer (headers, then each part of its body) takes longer counts as a network error and is retried. */
const POST_ANSWER_TIMEOUT_MS = 120_000;

type PostOutcome = { ok: true } | { ok: false; status: number | "gave-up" | "discarded"; text: string };

export class JobOutbox {
  readonly #options: JobOutboxOptions;
  /** A streaming job queues up to maxBufferedStreamBytes of chunks here: tens of thousands of tokens. */
  readonly #queue = new Fifo<Entry>();
  #running = false;
  #unpostedStreamBytes = 0;
  #progressCount = 0;
  #chunkCount = 0;
  #rejected: { label: string; status: number } | undefined;
  #discarded = false;
  /** Ends the post in flight and its retries: aborted by the give-up signal or by discard(). */
  readonly #cut = new AbortController();
  /** Handlers waiting for the stream's unposted bytes to fall under their budget; made by the first wait (a streaming job's). */
  #drained: WaiterSet | undefined;
  #resolveDone!: (delivery: FinalDelivery) => void;
  /** Resolves when the final result was posted, replaced by an error, rejected, given up or discarded. */
  readonly done: Promise<FinalDelivery>;

  constructor(options: JobOutboxOptions) {
    this.#options = options;
    let resolveDone!: (delivery: FinalDelivery) => void;
    this.done = new Promise((resolve) => {
      resolveDone = resolve;
    });
    const { giveUp } = options;
    if (giveUp.aborted) {
      this.#cut.abort(giveUp.reason);
      this.#resolveDone = resolveDone;
    } else {
      const unsubscribe = onAbort(giveUp, () => this.#cut.abort(giveUp.reason));
      // Every post waits on `cut` through onAbort, one at a time: without a subscription of its
      // own here, each post's would be the signal's only one, and each post would add and remove
      // the signal's real listener (about 2 µs a post of a token stream).
      const holdCut = onAbort(this.#cut.signal, () => undefined);
      // Both listeners go as the outbox is done (unsubscribing twice does nothing).
      this.#resolveDone = (delivery) => {
        unsubscribe();
        holdCut();
        resolveDone(delivery);
      };
    }
  }

  /** Bytes of stream chunks queued but not yet accepted by the platform. */
  get unpostedStreamBytes(): number {
    return this.#unpostedStreamBytes;
  }

  /** Queues a progress update (`output` is JSON text). */
  progress(url: string, outputJson: string): void {
    this.#progressCount += 1;
    const body = `{"status":"IN_PROGRESS","output":${outputJson}}`;
    this.#push({
      kind: "progress",
      url,
      body,
      bytes: Buffer.byteLength(body),
      label: `progress update ${this.#progressCount}`,
      stopPod: false,
    });
  }

  /** Queues stream chunk bodies. */
  chunks(url: string, bodies: readonly (string | Uint8Array)[]): void {
    for (const body of bodies) {
      this.#chunkCount += 1;
      const bytes = Buffer.byteLength(body);
      this.#unpostedStreamBytes += bytes;
      this.#push({
        kind: "chunk",
        url,
        body,
        bytes,
        label: `stream chunk ${this.#chunkCount}`,
        stopPod: false,
      });
    }
  }

  /** Queues the final result; nothing may follow it. */
  final(url: string, body: string, stopPod: boolean): void {
    this.#push({
      kind: "final",
      url,
      body,
      bytes: Buffer.byteLength(body),
      label: "the final result",
      stopPod,
    });
  }

  /** Resolves once the unposted stream bytes are at most `budget` (or the outbox can post no more). */
  async waitBelow(budget: number): Promise<void> {
    while (this.#unpostedStreamBytes > budget && !this.#discarded && !this.#options.giveUp.aborted) {
      // Woken after each post and on discard; the give-up signal ends the wait too.
      this.#drained ??= new WaiterSet();
      await this.#drained.wait(undefined, this.#options.giveUp);
    }
  }

  /** Drops everything not yet sent (a job-stop: nothing more is posted for the job). */
  discard(): void {
    this.#discarded = true;
    // A post being retried (a 5xx, a dead connection) stops now, not at shutdown: the job's slot frees.
    this.#cut.abort(new RunletError("RUNLET_JOB_STOPPED", "the platform stopped this job"));
    this.#queue.clear();
    this.#unpostedStreamBytes = 0;
    this.#wake();
    if (!this.#running) this.#resolveDone("discarded");
  }

  #push(entry: Entry): void {
    if (this.#discarded) return;
    this.#queue.push(entry);
    if (!this.#running) {
      settle(this.#run(), (err) =>
        this.#options.log.error({ err, jobId: this.#options.jobId }, "this job's outbox failed"),
      );
    }
  }

  #wake(): void {
    this.#drained?.wakeAll();
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      for (let entry = this.#queue.shift(); entry !== undefined; entry = this.#queue.shift()) {
        if (entry.kind === "final") {
          this.#resolveDone(await this.#deliverFinal(entry));
          return;
        }
        const outcome = await this.#post(entry);
        if (entry.kind === "chunk") {
          // discard() already zeroed the count, this entry's bytes included.
          if (!this.#discarded) this.#unpostedStreamBytes -= entry.bytes;
          this.#options.events?.emit("chunkPosted", {
            jobId: this.#options.jobId,
            bytes: entry.bytes,
            ok: outcome.ok,
          });
        }
        this.#wake();
        if (this.#discarded) return;
        if (!outcome.ok && typeof outcome.status === "number" && this.#rejected === undefined) {
          this.#rejected = { label: entry.label, status: outcome.status };
          this.#options.log.error(
            {
              code: "RUNLET_REPORT_REJECTED",
              status: outcome.status,
              bytes: entry.bytes,
              answer: outcome.text.slice(0, 200),
            },
            `the platform rejected ${entry.label} with HTTP ${outcome.status}`,
          );
        }
      }
    } finally {
      this.#running = false;
      if (this.#discarded) this.#resolveDone("discarded");
    }
  }

  async #deliverFinal(entry: Entry): Promise<FinalDelivery> {
    const { log } = this.#options;
    if (this.#rejected !== undefined) {
      const { label, status } = this.#rejected;
      const message = `the platform rejected ${label} of this job with HTTP ${status}; its output is incomplete`;
      return (await this.#replaceWithError(entry, message)) ? "replaced" : "rejected";
    }
    const outcome = await this.#post(entry);
    if (outcome.ok) return "delivered";
    if (typeof outcome.status !== "number") return outcome.status;
    log.error(
      {
        code: "RUNLET_REPORT_REJECTED",
        status: outcome.status,
        bytes: entry.bytes,
        answer: outcome.text.slice(0, 200),
      },
      `the platform rejected the final result (${entry.bytes} bytes) with HTTP ${outcome.status}; reporting why instead`,
    );
    const message = `the platform rejected this job's result (${entry.bytes} bytes) with HTTP ${outcome.status}`;
    return (await this.#replaceWithError(entry, message)) ? "replaced" : "rejected";
  }

  /** Posts one short `{error}` instead of a rejected result; true when the platform took it. */
  async #replaceWithError(entry: Entry, message: string): Promise<boolean> {
    const body = JSON.stringify(entry.stopPod ? { error: message, stopPod: true } : { error: message });
    const outcome = await this.#post({ ...entry, body, bytes: Buffer.byteLength(body) });
    if (!outcome.ok && typeof outcome.status === "number") {
      this.#options.log.error(
        { code: "RUNLET_REPORT_REJECTED", status: outcome.status },
        `the platform also rejected the short error report with HTTP ${outcome.status}; giving up on this job`,
      );
    }
    return outcome.ok;
  }

  /** Posts until a 2xx, a non-retryable answer, the give-up signal, or a discard (job-stop). */
  #post(entry: Entry): Promise<PostOutcome> {
    const { http, jobId, log, retry, clock, events } = this.#options;
    const cut = this.#cut.signal;
    // discard() aborts `cut` too: an abort is a discard when the flag says so, else the give-up.
    const ended = (): PostOutcome =>
      this.#discarded ? { ok: false, status: "discarded", text: "" } : this.#gaveUp(entry);
    return sendWithRetry<PostOutcome>({
      signal: cut,
      clock,
      aborted: ended,
      retry: (attempt, failed) => nextRetry(retry, attempt, failed),
      attempt: async () => {
        try {
          const response = await http.postJson(entry.url, entry.body, {
            jobId,
            signal: cut,
            answerTimeoutMs: POST_ANSWER_TIMEOUT_MS,
          });
          if (response.status >= 200 && response.status < 300) return { done: { ok: true } };
          return {
            failed: response,
            otherwise: () => ({ ok: false, status: response.status, text: response.text }),
          };
        } catch (err) {
          if (cut.aborted) return { done: ended() };
          if (isRefusedRequest(err)) {
            // Refused before it was sent (a header or URL the client cannot carry): not a network
            // error, and the same request would be refused for ever while the job holds its slot.
            log.error(
              { code: "RUNLET_REQUEST_REFUSED", err: (err as Error).message },
              `posting ${entry.label} was refused before sending; giving up on it`,
            );
            return { done: { ok: false, status: "gave-up", text: (err as Error).message } };
          }
          return {
            failed: { error: err },
            otherwise: () => ({ ok: false, status: "gave-up", text: (err as Error).message }),
          };
        }
      },
      onRetry: ({ attempt, delayMs: waitMs, failed }) => {
        if ("status" in failed) {
          log.warn(
            { status: failed.status, attempt, waitMs },
            `posting ${entry.label} got HTTP ${failed.status}; retrying`,
          );
          events?.emit("retrying", { jobId, what: entry.label, attempt, waitMs, status: failed.status });
        } else {
          const message = (failed.error as Error).message;
          log.warn({ err: message, attempt, waitMs }, `posting ${entry.label} failed; retrying`);
          events?.emit("retrying", { jobId, what: entry.label, attempt, waitMs, error: message });
        }
      },
    });
  }

  #gaveUp(entry: Entry): PostOutcome {
    const error = new RunletError(
      "RUNLET_REPORT_GAVE_UP",
      `gave up posting ${entry.label}: the worker is exiting`,
    );
    this.#options.log.error({ code: error.code, bytes: entry.bytes }, error.message);
    return { ok: false, status: "gave-up", text: "" };
  }
}
