import { onAbort } from "../linked-signal.js";

/**
 * The one reader of answers read whole (undici's habit: one handler, many dispatchers). Both HTTP
 * clients under the transport (node-client.ts, undici-client.ts) are thin drivers: they start the
 * request and feed this reader what happens to it (`started`, `headers`, `data`, `end`, `error`);
 * every bound on the answer lives here, once: the caller's signal (with its settle time and its
 * `abortBody` reach), the total deadline for the headers, the byte and time bounds of the body.
 */

/** One request as sent: its headers are final (the transport chose the credential). */
export interface Hop {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array | undefined;
}

/** The bounds on an answer read whole ({@link Collector.collect}). */
export interface CollectLimits {
  readonly signal: AbortSignal | undefined;
  /**
   * Longest wait for the whole of the headers (a total deadline from the request's start: a server
   * that trickles them byte by byte is cut too), and then between body bytes, ms; undefined: none
   * (long polls).
   */
  readonly answerTimeoutMs: number | undefined;
  /** `Infinity`: no bound. */
  readonly maxAnswerBytes: number;
  /** `Infinity`: no bound. */
  readonly answerBodyMs: number;
  /** When `signal` aborts before the headers came, how long to wait for them first, ms. */
  readonly settleMs: number;
  /** `signal` cuts the body too once the headers came (the job API client), not only the wait for them. */
  readonly abortBody?: boolean;
}

/** What an answer's headers are read from: node:http builds its header object on first read. */
export interface HeaderSource {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

/** An answer read whole (or as far as its bounds allow). */
export interface Answer {
  readonly status: number;
  /** Lower-case names; made on first read. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
  /** Set when the body was not read to its end: past `maxAnswerBytes` or `answerBodyMs`. */
  readonly truncated?: "bytes" | "time";
}

/** What reads answers whole: the node:http client, or the undici one once loaded. */
export interface Collector {
  collect(hop: Hop, limits: CollectLimits): Promise<Answer>;
  close(): Promise<void>;
}

/** An error with a network code, as node:http's own errors have (the retry policy reads `code`). */
export function networkError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

const NO_HEADERS: HeaderSource = { headers: {} };

/** An answer whose header object is read from its source only when asked for. */
class ReadAnswer implements Answer {
  readonly status: number;
  readonly text: string;
  readonly truncated?: "bytes" | "time";
  readonly #source: HeaderSource;

  constructor(status: number, source: HeaderSource, text: string, truncated: "bytes" | "time" | undefined) {
    this.status = status;
    this.#source = source;
    this.text = text;
    if (truncated !== undefined) this.truncated = truncated;
  }

  get headers(): Answer["headers"] {
    return this.#source.headers;
  }
}

/** How a driver stops its request: with the reason the request ends for. */
export type Cancel = (reason: Error) => void;

/** Options of one {@link AnswerReader}. */
export interface AnswerReaderOptions {
  /**
   * The driver's client holds the headers to `answerTimeoutMs` from the request's start by itself,
   * so the reader sets no timer of its own for them: undici's `headersTimeout` is such a deadline
   * (bytes read do not refresh it; test/http/transport-contract.test.ts trickles headers at both
   * clients). node:http's socket timeout is an idle timer, so its driver leaves this off. @default false
   */
  readonly clientBoundsHeaders?: boolean;
  /**
   * Arm the body's time bound a microtask after the headers: the bytes at hand are parsed by then,
   * so a short answer has ended and needs no timer set and cleared (undici parses the whole read
   * before it hands the headers on). @default false
   */
  readonly deferBodyTimer?: boolean;
}

/**
 * Reads one answer whole under its limits. The driver calls {@link started} once its request
 * exists, then {@link headers}, {@link data}, {@link end} or {@link error} as they happen; every
 * call after the answer settled is ignored. {@link promise} settles once: with the answer, or with
 * the signal's reason, the deadline's network error or the client's error.
 */
export class AnswerReader {
  readonly promise: Promise<Answer>;
  readonly #hop: Hop;
  readonly #limits: CollectLimits;
  readonly #options: AnswerReaderOptions;
  #resolve!: (answer: Answer) => void;
  #reject!: (err: unknown) => void;
  #cancel: Cancel | undefined;
  /** A cut asked for before the driver's request existed: applied in {@link started}. */
  #pendingCut: Error | undefined;
  #status = 0;
  #source: HeaderSource = NO_HEADERS;
  #headersCame = false;
  #settled = false;
  readonly #chunks: Buffer[] = [];
  #bytes = 0;
  /** The headers' deadline, then the body's time bound. */
  #timer: NodeJS.Timeout | undefined;
  #settleTimer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;

  constructor(hop: Hop, limits: CollectLimits, options: AnswerReaderOptions = {}) {
    this.#hop = hop;
    this.#limits = limits;
    this.#options = options;
    this.promise = new Promise<Answer>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    const { signal, answerTimeoutMs } = limits;
    if (signal?.aborted) {
      this.#fail(signal.reason);
      return;
    }
    // One listener per signal however many requests share it (every in-flight post shares the
    // worker's give-up signal): a listener each tripped MaxListenersExceededWarning under a burst.
    if (signal !== undefined) this.#unsubscribe = onAbort(signal, () => this.#onAbort(signal));
    if (answerTimeoutMs !== undefined && !options.clientBoundsHeaders) {
      this.#timer = setTimeout(() => this.#headersLate(answerTimeoutMs), answerTimeoutMs);
    }
  }

  /** True once the answer settled (the driver need not feed it further). */
  get settled(): boolean {
    return this.#settled;
  }

  /** The driver's request exists; `cancel` ends it. */
  started(cancel: Cancel): void {
    this.#cancel = cancel;
    if (this.#pendingCut !== undefined) cancel(this.#pendingCut);
  }

  /** The final answer's headers came (1xx answers never reach here). */
  headers(status: number, source: HeaderSource): void {
    if (this.#settled) return;
    this.#status = status;
    this.#source = source;
    this.#headersCame = true;
    clearTimeout(this.#settleTimer);
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const { answerBodyMs } = this.#limits;
    if (!Number.isFinite(answerBodyMs)) return;
    if (this.#options.deferBodyTimer) queueMicrotask(() => this.#armBodyTimer());
    else this.#armBodyTimer();
  }

  /** A piece of the body. */
  data(chunk: Buffer): void {
    if (this.#settled) return;
    const max = this.#limits.maxAnswerBytes;
    const room = max - this.#bytes;
    this.#bytes += chunk.length;
    if (this.#bytes > max) {
      if (room > 0) this.#chunks.push(chunk.subarray(0, room));
      this.#stopReading("bytes");
      return;
    }
    this.#chunks.push(chunk);
  }

  /** The body ended. */
  end(): void {
    this.#finish(undefined);
  }

  /** The request or its answer failed. */
  error(err: unknown): void {
    this.#fail(err);
  }

  #armBodyTimer(): void {
    if (!this.#settled) this.#timer = setTimeout(() => this.#stopReading("time"), this.#limits.answerBodyMs);
  }

  #onAbort(signal: AbortSignal): void {
    if (this.#limits.settleMs <= 0 || this.#headersCame) this.#cut(signal);
    else this.#settleTimer ??= setTimeout(() => this.#cut(signal), this.#limits.settleMs);
  }

  /** The signal's end: before the headers (or with `abortBody`), the request fails with its reason. */
  #cut(signal: AbortSignal): void {
    // Once the headers came the answer is the server's: read it (bounded) rather than drop it,
    // unless the caller wants the body cut too.
    if (this.#settled || (this.#headersCame && !this.#limits.abortBody)) return;
    this.#fail(signal.reason);
    this.#stop(signal.reason as Error);
  }

  #headersLate(ms: number): void {
    if (this.#settled || this.#headersCame) return;
    const err = networkError(`no answer to the ${this.#hop.method} within ${ms} ms`, "ETIMEDOUT");
    this.#fail(err);
    this.#stop(err);
  }

  #stopReading(why: "bytes" | "time"): void {
    this.#finish(why);
    // The rest is not wanted: drop the connection (its error is ignored, the answer is out).
    this.#stop(new Error(`the answer to ${this.#hop.method} was not read to its end (${why})`));
  }

  #stop(reason: Error): void {
    if (this.#cancel === undefined) this.#pendingCut = reason;
    else this.#cancel(reason);
  }

  #done(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#unsubscribe?.();
    clearTimeout(this.#timer);
    clearTimeout(this.#settleTimer);
    return true;
  }

  #fail(err: unknown): void {
    if (this.#done()) this.#reject(err);
  }

  #finish(truncated: "bytes" | "time" | undefined): void {
    if (!this.#done()) return;
    const chunks = this.#chunks;
    const text = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
    this.#resolve(new ReadAnswer(this.#status, this.#source, text, truncated));
  }
}
