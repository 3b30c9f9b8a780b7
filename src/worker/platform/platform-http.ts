import type { Connect } from "../../http/in-memory.js";
import { type Answer, HttpTransport, type RequestOptions } from "../../http/transport.js";
import { RESULT_POST_HEADERS } from "../../protocol/headers.js";
import { settle } from "../../task-sink.js";
import { USER_AGENT } from "../../version.js";
import { requestIdHeader } from "./request-id.js";

export {
  DEFAULT_ANSWER_BODY_MS,
  DEFAULT_MAX_ANSWER_BYTES,
  MAX_CONNECTIONS as MAX_PLATFORM_CONNECTIONS,
  MAX_REDIRECTS,
} from "../../http/rules.js";
export { isRefusedRequest } from "../../http/transport.js";

/**
 * The worker's HTTP to the platform: the headers of docs/protocol.md, "Headers", set per request
 * (never on a shared session, which races under concurrency), over the one transport
 * (src/http/transport.ts) with the platform's key as its credential. The transport starts on
 * node:http (nothing to load before the first take) and moves answers read whole onto undici's
 * Pool once it has loaded it in the background, when the worker is idle after its first job.
 */

/** `T` with its fields writable, to build an options object field by field. */
type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** One answer, body already read. */
export type PlatformResponse = Answer;

/** Options of one request. */
export interface PlatformRequestOptions {
  /** Sets `X-Request-ID`: the request is about this job. */
  readonly jobId?: string;
  /** Cuts the request short (long polls on shutdown, posts at the flush deadline). */
  readonly signal?: AbortSignal;
  /**
   * Longest wait for the answer's headers, and then between its body's bytes, in ms; a request
   * that takes longer fails like a network error. @default none (long polls are bounded by `signal`)
   */
  readonly answerTimeoutMs?: number;
  /**
   * Largest answer body read, bytes; past it the rest is not read (the connection is dropped) and
   * the answer comes back with what was read and `truncated: "bytes"`: its status still counts.
   * @default 1 MiB
   */
  readonly maxAnswerBytes?: number;
  /**
   * Longest time spent reading an answer's body once its headers came, ms; past it the answer
   * comes back with `truncated: "time"`. @default 30 000
   */
  readonly answerBodyMs?: number;
  /**
   * When `signal` aborts before the answer's headers came, how long to wait for them first, ms:
   * an answer already on the wire (a take the platform has handed over) is then read rather than
   * cut off unread. Once the headers came, `signal` no longer cuts the answer: its body is read
   * within `maxAnswerBytes` and `answerBodyMs`. @default 0 (a request without headers is cut at once)
   */
  readonly settleMs?: number;
}

/** The platform's answers read whole, and the fast client loaded in the background. */
const loadFastClient = () => import("../../http/undici-client.js").then((m) => m.loadUndiciClient());

/**
 * How long the worker must have been idle before undici's Pool is loaded, ms: an idle take in
 * flight and no post in flight for this long, after a first job's result went out.
 */
export const WARM_UP_IDLE_MS = 250;

/** Talks to the platform's worker routes. */
export class PlatformHttp {
  readonly #transport: HttpTransport;
  /** Posts (results, stream items, progress) not yet answered. */
  #postsInFlight = 0;
  /** A post has been answered: a first job ran. */
  #posted = false;
  /** Takes in flight that said `job_in_progress=0`: the worker had no job when it sent them. */
  #idleTakes = 0;
  /** Takes in flight (job-take, job-take-batch), whatever they said. */
  #takes = 0;
  /**
   * The jobs the worker holds, as its job board last said ({@link jobsHeld}); undefined when nobody
   * said, and then only a take's own `job_in_progress=0` says the worker is idle.
   */
  #jobsHeld: number | undefined;
  #warmTimer: NodeJS.Timeout | undefined;
  #warmStarted = false;
  /** The last job's headers, with and without the JSON content type ({@link #jobHeaders}). */
  #lastJsonHeaders:
    | { readonly jobId: string; readonly headers: Readonly<Record<string, string>> }
    | undefined;
  #lastHeaders: { readonly jobId: string; readonly headers: Readonly<Record<string, string>> } | undefined;

  /** `connect`: the platform's connections in memory (the worker's `connect` option; tests). */
  constructor(apiKey: string | undefined, connect?: Connect) {
    this.#transport = new HttpTransport({
      userAgent: USER_AGENT,
      ...(apiKey === undefined ? {} : { credential: apiKey }),
      loadFastClient,
      ...(connect === undefined ? {} : { connect }),
    });
  }

  /**
   * Loads undici's Pool for the platform's answers, in the background: call it when no job runs
   * (loading takes the event loop ~30 ms). Resolves true once it is in use.
   */
  warmUp(): Promise<boolean> {
    this.#warmStarted = true;
    return this.#transport.warmUp();
  }

  /** Which client reads the platform's answers now. */
  get client(): "node:http" | "undici" {
    return this.#transport.client;
  }

  /**
   * The job board's count of the jobs the worker holds (running or still being reported): at 0,
   * a take already in flight waits for work although it said `job_in_progress=1` when it was
   * sent (a worker with spare slots keeps one take held while its jobs finish).
   */
  jobsHeld(count: number): void {
    this.#jobsHeld = count;
    if (count === 0) this.#considerWarmUp();
  }

  /** A take is in flight and no job is held: the take's own `jobsHeld` false, or the board's count. */
  get #idle(): boolean {
    return this.#idleTakes > 0 || (this.#takes > 0 && this.#jobsHeld === 0);
  }

  /**
   * Loads the fast client once the worker is idle after its first job ({@link WARM_UP_IDLE_MS}),
   * never before the first take nor while a job runs: a take waits for work while no job is held
   * (its own `job_in_progress=0`, docs/protocol.md, "Taking jobs", or the job board's count), and
   * no post is in flight. A job that arrives while the Pool loads waits for it once (~30 ms of
   * CPU on this machine).
   */
  #considerWarmUp(): void {
    if (this.#warmStarted || !this.#posted || !this.#idle || this.#postsInFlight > 0) return;
    if (this.#warmTimer !== undefined) return;
    this.#warmTimer = setTimeout(() => {
      this.#warmTimer = undefined;
      if (this.#warmStarted || !this.#idle || this.#postsInFlight > 0) return;
      this.#warmStarted = true;
      // warmUp() never rejects (a failed load keeps node:http).
      settle(this.#transport.warmUp(), () => undefined);
    }, WARM_UP_IDLE_MS);
    this.#warmTimer.unref();
  }

  /** GET `url`. Throws on network errors and aborts; any status is an answer. */
  get(url: string, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    return this.#transport.request("GET", url, this.#options(options, false));
  }

  /**
   * A job-take: GET `url`, which says `job_in_progress` as `jobsHeld` does (the take loop builds
   * both from the same count). A take sent while no job is held tells the fast client's warm-up
   * that the worker is idle. Throws on network errors and aborts; any status is an answer.
   */
  take(url: string, jobsHeld: boolean, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    const request = this.get(url, options);
    if (this.#warmStarted) return request;
    const idle = jobsHeld ? 0 : 1;
    this.#takes++;
    this.#idleTakes += idle;
    this.#considerWarmUp();
    return request.finally(() => {
      this.#takes--;
      this.#idleTakes -= idle;
    });
  }

  /** POST JSON (text, or its UTF-8 bytes) to `url`. Throws on network errors and aborts; any status is an answer. */
  postJson(
    url: string,
    body: string | Uint8Array,
    options: PlatformRequestOptions = {},
  ): Promise<PlatformResponse> {
    const requestOptions = this.#options(options, true);
    requestOptions.body = body;
    const request = this.#transport.request("POST", url, requestOptions);
    if (this.#warmStarted) return request;
    this.#postsInFlight++;
    return request.finally(() => {
      this.#postsInFlight--;
      this.#posted = true;
      this.#considerWarmUp();
    });
  }

  /**
   * The headers of a request about `jobId`, the same object for the job's next posts: a token
   * stream posts thousands in a row, and the transport merges a headers object it saw last time
   * only once.
   */
  #jobHeaders(jobId: string, json: boolean): Readonly<Record<string, string>> {
    const last = json ? this.#lastJsonHeaders : this.#lastHeaders;
    if (last?.jobId === jobId) return last.headers;
    const headers = json
      ? { ...RESULT_POST_HEADERS, "x-request-id": requestIdHeader(jobId) }
      : { "x-request-id": requestIdHeader(jobId) };
    if (json) this.#lastJsonHeaders = { jobId, headers };
    else this.#lastHeaders = { jobId, headers };
    return headers;
  }

  /** The transport's options of one request, built field by field (one object a request). */
  #options(options: PlatformRequestOptions, json: boolean): Writable<RequestOptions> {
    const out: Writable<RequestOptions> = {};
    if (options.jobId !== undefined) out.headers = this.#jobHeaders(options.jobId, json);
    else if (json) out.headers = RESULT_POST_HEADERS;
    if (options.signal !== undefined) out.signal = options.signal;
    if (options.answerTimeoutMs !== undefined) out.answerTimeoutMs = options.answerTimeoutMs;
    if (options.maxAnswerBytes !== undefined) out.maxAnswerBytes = options.maxAnswerBytes;
    if (options.answerBodyMs !== undefined) out.answerBodyMs = options.answerBodyMs;
    if (options.settleMs !== undefined) out.settleMs = options.settleMs;
    return out;
  }

  /** Closes idle connections; requests still running are destroyed, and later ones refused. */
  close(): Promise<void> {
    clearTimeout(this.#warmTimer);
    this.#warmStarted = true;
    return this.#transport.close();
  }
}
