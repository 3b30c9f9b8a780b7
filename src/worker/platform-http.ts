import type { Agent, Dispatcher } from "undici";
import { RunletError } from "../errors.js";
import { onAbort } from "../linked-signal.js";
import { RESULT_POST_HEADERS } from "../protocol/headers.js";
import { USER_AGENT } from "../version.js";
import { requestIdHeader } from "./request-id.js";

/**
 * The worker's HTTP to the platform: one keep-alive undici Agent, and the headers of
 * docs/protocol.md, "Headers" set per request (never on a shared session, which races under concurrency).
 */

/** One answer, body already read. */
export interface PlatformResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
}

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
   * Largest answer body read, bytes; a longer one fails the request (a
   * `RUNLET_PROTOCOL_BAD_JOB` error) without reading the rest. @default no limit
   */
  readonly maxAnswerBytes?: number;
}

/**
 * How many connections the worker opens to the platform at most; more requests wait for one.
 * A take answered with thousands of jobs it did not ask for fails each of them with a post:
 * without a bound each post opened its own socket at once (EMFILE at 1 024 open files).
 */
export const MAX_PLATFORM_CONNECTIONS = 64;

/** True for a request the HTTP client refused before sending it: sending it again fails the same way. */
export function isRefusedRequest(err: unknown): boolean {
  return err instanceof RunletError && err.code === "RUNLET_REQUEST_REFUSED";
}

/** undici's errors for a request it will not send (a header value or URL it cannot carry). */
function refusal(err: unknown, method: string): unknown {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code !== "UND_ERR_INVALID_ARG" && !(err instanceof TypeError)) return err;
  return new RunletError(
    "RUNLET_REQUEST_REFUSED",
    `the HTTP client refused the ${method} before sending it: ${(err as Error).message}`,
    { cause: err },
  );
}

/** How many parsed URLs to keep: a job's stream and done URLs, the take and stop polls. */
const TARGET_CACHE_SIZE = 64;
const SLASH = 47;
/**
 * A path and query the URL parser would leave exactly as written: only characters it never
 * encodes, and no `.` segment for it to resolve. Such a path after a known origin is sent as it
 * is; anything else is parsed.
 */
const PLAIN_PATH = /^(?!.*\/\.\.?(?:[/?]|$))[A-Za-z0-9\-._~!$&()*+,;=:@/%?]*$/;

/**
 * undici, imported once on first use. Its public entry also evaluates its fetch, WebSocket and
 * cache modules and makes Node load its own internal undici (docs/benchmarks.md, "Cold start"):
 * imported statically it was most of runlet's start-up phase. The worker starts loading it when
 * it is created, so it loads while the start-up phases (fitness checks, setup) run, not before them.
 */
let undici: Promise<typeof import("undici")> | undefined;

/** Talks to the platform's worker routes. */

export class PlatformHttp {
  /** Set once undici has loaded; every request goes through it. */
  #agent: Agent | undefined;
  /** undici's load and the agent's creation; the first requests wait for it. */
  readonly #loading: Promise<Agent>;
  /** URL text → origin and path. A streaming job posts thousands of chunks to one URL: parse it once. */
  readonly #targets = new Map<string, { readonly origin: string; readonly path: string }>();
  /** Origins of URLs parsed so far (one, on the platform). */
  readonly #origins = new Set<string>();
  /** Headers of every GET and every JSON POST, built once (undici only reads them). */
  readonly #plainHeaders: Readonly<Record<string, string>>;
  readonly #jsonHeaders: Readonly<Record<string, string>>;

  constructor(apiKey: string | undefined) {
    const plain: Record<string, string> = { "user-agent": USER_AGENT };
    if (apiKey !== undefined) plain["authorization"] = apiKey;
    this.#plainHeaders = Object.freeze(plain);
    this.#jsonHeaders = Object.freeze({ ...plain, ...RESULT_POST_HEADERS });
    undici ??= import("undici");
    this.#loading = undici.then((mod) => {
      // undici is CommonJS: its exports are the namespace's default, bundled (runlet build) or not.
      const { Agent } = mod.default;
      // Long polls are bounded by the caller's signal (takeTimeoutMs), not by undici's own timers.
      this.#agent = new Agent({
        keepAliveTimeout: 30_000,
        headersTimeout: 0,
        bodyTimeout: 0,
        connections: MAX_PLATFORM_CONNECTIONS,
      });
      return this.#agent;
    });
    // A failed load fails each request that waits for it; it is not also an unhandled rejection.
    this.#loading.catch(() => {});
  }

  #target(url: string): { readonly origin: string; readonly path: string } {
    let target = this.#targets.get(url);
    if (target !== undefined) return target;
    // Each job's URLs are new text but share an origin seen before: split there instead of parsing.
    for (const origin of this.#origins) {
      if (url.startsWith(origin) && url.charCodeAt(origin.length) === SLASH) {
        const path = url.slice(origin.length);
        if (PLAIN_PATH.test(path)) return { origin, path };
      }
    }
    const parsed = new URL(url);
    target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
    if (this.#targets.size >= TARGET_CACHE_SIZE) this.#targets.clear();
    this.#targets.set(url, target);
    if (this.#origins.size < TARGET_CACHE_SIZE) this.#origins.add(parsed.origin);
    return target;
  }

  #headers(jobId: string | undefined, json: boolean): Record<string, string> {
    const base = json ? this.#jsonHeaders : this.#plainHeaders;
    return jobId === undefined ? base : { ...base, "x-request-id": requestIdHeader(jobId) };
  }

  /** GET `url`. Throws on network errors and aborts; any status is an answer. */
  get(url: string, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    return this.#send("GET", url, this.#headers(options.jobId, false), undefined, options);
  }

  /** POST JSON (text, or its UTF-8 bytes) to `url`. Throws on network errors and aborts; any status is an answer. */
  postJson(
    url: string,
    body: string | Uint8Array,
    options: PlatformRequestOptions = {},
  ): Promise<PlatformResponse> {
    return this.#send("POST", url, this.#headers(options.jobId, true), body, options);
  }

  /**
   * One request through undici's dispatcher, the answer collected into a string. A streaming job
   * makes one request per chunk, so this skips what `request()` builds per call that the worker
   * does not need: the URL parse (cached in #target), a Readable for the answer body, and, with
   * `answerTimeoutMs`, per-request AbortSignals (undici's own header and body timers instead).
   */
  #send(
    method: "GET" | "POST",
    url: string,
    headers: Record<string, string>,
    body: string | Uint8Array | undefined,
    options: PlatformRequestOptions,
  ): Promise<PlatformResponse> {
    const agent = this.#agent;
    if (agent === undefined) {
      return this.#loading.then(() => this.#send(method, url, headers, body, options));
    }
    const { signal, answerTimeoutMs, maxAnswerBytes } = options;
    return new Promise<PlatformResponse>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let controller: { abort(reason: Error): void } | undefined;
      let status = 0;
      let answerHeaders: PlatformResponse["headers"] = {};
      const chunks: Buffer[] = [];
      let answerBytes = 0;
      // One listener per signal however many requests share it (every in-flight post shares the
      // worker's give-up signal): a listener each tripped MaxListenersExceededWarning under a burst.
      const unsubscribe =
        signal === undefined ? undefined : onAbort(signal, () => controller?.abort(signal.reason));
      const settle = (): void => unsubscribe?.();
      try {
        this.#dispatch(agent, method, url, headers, body, answerTimeoutMs, {
          onRequestStart(c) {
            controller = c;
            // Aborted while the request waited for a connection.
            if (signal?.aborted) c.abort(signal.reason);
          },
          onResponseStart(_c, statusCode, responseHeaders) {
            status = statusCode;
            answerHeaders = responseHeaders;
          },
          onResponseData(c, chunk) {
            answerBytes += chunk.length;
            if (maxAnswerBytes !== undefined && answerBytes > maxAnswerBytes) {
              c.abort(
                new RunletError(
                  "RUNLET_PROTOCOL_BAD_JOB",
                  `the answer to ${method} is over ${maxAnswerBytes} bytes; not read further`,
                ),
              );
              return;
            }
            chunks.push(chunk);
          },
          onResponseEnd() {
            settle();
            resolve({ status, headers: answerHeaders, text: Buffer.concat(chunks).toString("utf8") });
          },
          onResponseError(_c, err) {
            settle();
            reject(refusal(err, method));
          },
        });
      } catch (err) {
        // A closed agent, or a header or URL undici will not send, refuses synchronously.
        settle();
        reject(refusal(err, method));
      }
    });
  }

  #dispatch(
    agent: Agent,
    method: "GET" | "POST",
    url: string,
    headers: Record<string, string>,
    body: string | Uint8Array | undefined,
    answerTimeoutMs: number | undefined,
    handler: Dispatcher.DispatchHandler,
  ): void {
    agent.dispatch(
      {
        ...this.#target(url),
        method,
        headers,
        body: body ?? null,
        ...(answerTimeoutMs === undefined
          ? {}
          : { headersTimeout: answerTimeoutMs, bodyTimeout: answerTimeoutMs }),
      },
      handler,
    );
  }

  /** Closes idle connections; requests still running are destroyed. */
  async close(): Promise<void> {
    const agent = await this.#loading.catch(() => undefined);
    await agent?.destroy();
  }
}
