import type { ClientRequest, Agent as HttpAgent, IncomingMessage } from "node:http";
import { RunletError } from "../errors.js";
import { onAbort } from "../linked-signal.js";
import { RESULT_POST_HEADERS } from "../protocol/headers.js";
import { USER_AGENT } from "../version.js";
import { requestIdHeader } from "./request-id.js";

/**
 * The worker's HTTP to the platform: one keep-alive node:http Agent (node:https's for an https
 * platform), and the headers of docs/protocol.md, "Headers" set per request (never on a shared
 * session, which races under concurrency).
 *
 * node:http rather than undici: undici's public entry, with its fetch, WebSocket and cache
 * modules, cost a start about 130 ms of CPU before the first take under the image's flags, and an
 * idle worker about 12 MiB (docs/benchmarks.md, "Cold start"). The modules come through
 * `process.getBuiltinModule`: a static ESM import of node:http makes Node build its namespace,
 * whose `WebSocket` getters load Node's own copy of undici anyway.
 */

/** One answer, body already read. */
export interface PlatformResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
  /**
   * Set when the body was not read to its end: it ran past `maxAnswerBytes` (`"bytes"`) or past
   * `answerBodyMs` (`"time"`). `status` and `headers` are still the server's, and `text` is the part read.
   */
  readonly truncated?: "bytes" | "time";
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
   * Largest answer body read, bytes; past it the rest is not read (the connection is dropped) and
   * the answer comes back with what was read and `truncated: "bytes"`: its status still counts.
   * @default {@link DEFAULT_MAX_ANSWER_BYTES}
   */
  readonly maxAnswerBytes?: number;
  /**
   * Longest time spent reading an answer's body once its headers came, ms; past it the answer
   * comes back with `truncated: "time"`. @default {@link DEFAULT_ANSWER_BODY_MS}
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

/** The default bound on an answer's body, bytes: the platform's answers to posts, pings and job-stop are a few bytes. */
export const DEFAULT_MAX_ANSWER_BYTES = 1_048_576; // 1 MiB
/** The default bound on the time an answer's body may take once its headers came, ms. */
export const DEFAULT_ANSWER_BODY_MS = 30_000;
/**
 * Most redirects (3xx with a `Location`) one request follows, the figure of the Python SDK's HTTP
 * client (aiohttp's `max_redirects`); every hop keeps the method and the body (docs/reliability.md,
 * "Answers, redirects and a take cut by close() (issue 32)").
 */
export const MAX_REDIRECTS = 10;

/**
 * How many connections the worker opens to the platform at most; more requests wait for one.
 * A take answered with thousands of jobs it did not ask for fails each of them with a post:
 * without a bound each post opened its own socket at once (EMFILE at 1 024 open files).
 */
export const MAX_PLATFORM_CONNECTIONS = 64;

/** Longest an idle keep-alive connection to the platform stays open, ms. */
const IDLE_SOCKET_MS = 30_000;

/** True for a request the HTTP client refused before sending it: sending it again fails the same way. */
export function isRefusedRequest(err: unknown): boolean {
  return err instanceof RunletError && err.code === "RUNLET_REQUEST_REFUSED";
}

/**
 * node:http's errors for a request it will not send (a header value, method or path it cannot
 * carry: ERR_INVALID_CHAR, ERR_UNESCAPED_CHARACTERS… are TypeErrors), and a request after close().
 */
function refusal(err: unknown, method: string): unknown {
  if (!(err instanceof TypeError)) return err;
  return new RunletError(
    "RUNLET_REQUEST_REFUSED",
    `the HTTP client refused the ${method} before sending it: ${(err as Error).message}`,
    { cause: err },
  );
}

/** True when `to` is the same host and port as `from`, or its http→https upgrade (a load balancer's redirect). */
function sameServer(from: URL, to: URL): boolean {
  if (from.hostname !== to.hostname) return false;
  if (from.protocol === to.protocol) return from.port === to.port;
  return from.protocol === "http:" && to.protocol === "https:" && (to.port === "" || to.port === "443");
}

/** The origin a redirect named, for messages (never its path or query, which may carry a token). */
function originOf(location: string, base: string): string {
  try {
    return new URL(location, base).origin;
  } catch {
    return "an unparsable Location";
  }
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

/** Where one origin's requests go: what node:http's request options need of it. */
interface Origin {
  readonly https: boolean;
  /** Without the brackets of an IPv6 literal. */
  readonly hostname: string;
  readonly port: number;
}

/** A URL's request: where it goes and the path (with the query) sent. */
interface Target {
  readonly origin: Origin;
  readonly path: string;
}

/** What a request of one scheme goes through: node:http's or node:https's. */
interface SchemeClient {
  readonly agent: HttpAgent;
  readonly request: typeof import("node:http").request;
}

/** An error with a network code, as node:http's own errors have (the retry policy reads `code`). */
function networkError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * An answer: its header object is made only when read. node:http builds an answer's headers on
 * first read, and most answers (a 200 to a stream post) are never asked for them.
 */
class Answer implements PlatformResponse {
  readonly status: number;
  readonly text: string;
  readonly truncated?: "bytes" | "time";
  readonly #message: IncomingMessage | undefined;

  constructor(message: IncomingMessage | undefined, text: string, truncated: "bytes" | "time" | undefined) {
    this.#message = message;
    this.status = message?.statusCode ?? 0;
    this.text = text;
    if (truncated !== undefined) this.truncated = truncated;
  }

  get headers(): PlatformResponse["headers"] {
    return this.#message?.headers ?? {};
  }
}

/** Talks to the platform's worker routes. */

export class PlatformHttp {
  /** Per scheme, its keep-alive agent and request function, made on first use. */
  #http: SchemeClient | undefined;
  #https: SchemeClient | undefined;
  #closed = false;
  /** URL text → where it goes and its path. A streaming job posts thousands of chunks to one URL: parse it once. */
  readonly #targets = new Map<string, Target>();
  /** Origin text (`http://host:port`) of URLs parsed so far (one, on the platform) → where its requests go. */
  readonly #origins = new Map<string, Origin>();
  /** Headers of every GET and every JSON POST, built once (node:http only reads them). */
  readonly #plainHeaders: Readonly<Record<string, string>>;
  readonly #jsonHeaders: Readonly<Record<string, string>>;

  constructor(apiKey: string | undefined) {
    const plain: Record<string, string> = { "user-agent": USER_AGENT };
    if (apiKey !== undefined) plain["authorization"] = apiKey;
    this.#plainHeaders = Object.freeze(plain);
    this.#jsonHeaders = Object.freeze({ ...plain, ...RESULT_POST_HEADERS });
  }

  /**
   * A scheme's agent and request function, made once (the module looked up and the agent built on
   * first use, not per request). Keep-alive, at most {@link MAX_PLATFORM_CONNECTIONS} sockets (more
   * requests queue for one). An idle socket closes after {@link IDLE_SOCKET_MS}, or a second
   * before the server's `Keep-Alive: timeout` when that is sooner (node:http reads the hint only
   * when the agent has a timeout of its own), so a request is not sent on a socket the server is
   * closing. The agent's timeout closes idle sockets only: long polls are bounded by the caller's
   * signal (takeTimeoutMs), and a post by `answerTimeoutMs`.
   */
  #clientFor(https: boolean): SchemeClient {
    const known = https ? this.#https : this.#http;
    if (known !== undefined) return known;
    const module = process.getBuiltinModule(https ? "node:https" : "node:http");
    const client: SchemeClient = {
      agent: new module.Agent({
        keepAlive: true,
        timeout: IDLE_SOCKET_MS,
        maxSockets: MAX_PLATFORM_CONNECTIONS,
        maxFreeSockets: MAX_PLATFORM_CONNECTIONS,
      }),
      request: module.request,
    };
    if (https) this.#https = client;
    else this.#http = client;
    return client;
  }

  /**
   * Where a URL's request goes, and its path. A URL seen before is looked up; a new one that starts
   * with an origin seen before (each job's URLs: new text, the platform's origin) is split there
   * instead of parsed. Throws a TypeError for a scheme other than http: and https: (a refusal).
   */
  #target(url: string): Target {
    const known = this.#targets.get(url);
    if (known !== undefined) return known;
    for (const [text, origin] of this.#origins) {
      if (url.startsWith(text) && url.charCodeAt(text.length) === SLASH) {
        const path = url.slice(text.length);
        if (PLAIN_PATH.test(path)) return { origin, path };
      }
    }
    const parsed = new URL(url);
    const origin = this.#origins.get(parsed.origin) ?? PlatformHttp.#originOf(parsed);
    const target = { origin, path: `${parsed.pathname}${parsed.search}` };
    if (this.#targets.size >= TARGET_CACHE_SIZE) this.#targets.clear();
    this.#targets.set(url, target);
    if (this.#origins.size < TARGET_CACHE_SIZE) this.#origins.set(parsed.origin, origin);
    return target;
  }

  static #originOf(url: URL): Origin {
    const https = url.protocol === "https:";
    if (!https && url.protocol !== "http:") {
      throw new TypeError(`the platform's URL must be http: or https:, got ${url.protocol}`);
    }
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    return { https, hostname, port: url.port === "" ? (https ? 443 : 80) : Number(url.port) };
  }

  #headers(jobId: string | undefined, json: boolean): Record<string, string> {
    const base = json ? this.#jsonHeaders : this.#plainHeaders;
    return jobId === undefined ? base : { ...base, "x-request-id": requestIdHeader(jobId) };
  }

  /** GET `url`. Throws on network errors and aborts; any status is an answer. */
  get(url: string, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    return this.#follow("GET", url, options.jobId, undefined, options);
  }

  /** POST JSON (text, or its UTF-8 bytes) to `url`. Throws on network errors and aborts; any status is an answer. */
  postJson(
    url: string,
    body: string | Uint8Array,
    options: PlatformRequestOptions = {},
  ): Promise<PlatformResponse> {
    return this.#follow("POST", url, options.jobId, body, options);
  }

  /**
   * Sends the request and follows redirects: a 3xx with a `Location` is sent again, same method and
   * same body (the bodies are strings or bytes, so each hop replays them), up to
   * {@link MAX_REDIRECTS} hops. The Python SDK's aiohttp does so for 307 and 308; for 301, 302 and
   * 303 it turns a POST into a GET without its body, which would drop a job's result, so runlet
   * keeps the POST there too. `Authorization` goes only to the same host (or its http→https
   * upgrade), never to another host a redirect names. The last answer is returned, a 3xx too when
   * the hops ran out.
   */
  async #follow(
    method: "GET" | "POST",
    url: string,
    jobId: string | undefined,
    body: string | Uint8Array | undefined,
    options: PlatformRequestOptions,
  ): Promise<PlatformResponse> {
    let headers = this.#headers(jobId, body !== undefined);
    let current = url;
    for (let hop = 0; ; hop++) {
      const response = await this.#send(method, current, headers, body, options);
      // Headers are read only for a 3xx: node:http builds an answer's header object on first read.
      if (response.status < 300 || response.status > 399) return response;
      const location = response.headers["location"];
      const to = Array.isArray(location) ? location[0] : location;
      if (to === undefined) return response;
      if (hop >= MAX_REDIRECTS) {
        // Not an answer to act on (a result must not be replaced by an error for it): a network error.
        throw new RunletError(
          "RUNLET_REQUEST_REDIRECTS",
          `the ${method} was redirected more than ${MAX_REDIRECTS} times (last to ${originOf(to, current)})`,
          { details: { status: response.status } },
        );
      }
      let next: URL;
      try {
        next = new URL(to, current);
      } catch {
        return response;
      }
      if (next.protocol !== "http:" && next.protocol !== "https:") return response;
      if (!sameServer(new URL(current), next) && headers["authorization"] !== undefined) {
        const { authorization: _dropped, ...rest } = headers;
        headers = rest;
      }
      if (options.signal?.aborted) throw options.signal.reason;
      current = next.href;
    }
  }

  /**
   * One request, the answer collected into a string. A streaming job makes one request per chunk,
   * so this keeps per-request work small: the URL parse is cached (#target), the answer's body is
   * collected as Buffers, and one socket timeout stands for the answer's header and body timers.
   */
  #send(
    method: "GET" | "POST",
    url: string,
    headers: Record<string, string>,
    body: string | Uint8Array | undefined,
    options: PlatformRequestOptions,
  ): Promise<PlatformResponse> {
    const { signal, answerTimeoutMs } = options;
    const maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    const answerBodyMs = options.answerBodyMs ?? DEFAULT_ANSWER_BODY_MS;
    const settleMs = options.settleMs ?? 0;
    return new Promise<PlatformResponse>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let req: ClientRequest | undefined;
      let answer: IncomingMessage | undefined;
      let headersCame = false;
      let settled = false;
      const chunks: Buffer[] = [];
      let answerBytes = 0;
      let bodyTimer: NodeJS.Timeout | undefined;
      let settleTimer: NodeJS.Timeout | undefined;
      const cut = (): void => {
        // Once the headers came the answer is the server's: read it (bounded) rather than drop it.
        if (headersCame || signal === undefined) return;
        req?.destroy(signal.reason);
      };
      // One listener per signal however many requests share it (every in-flight post shares the
      // worker's give-up signal): a listener each tripped MaxListenersExceededWarning under a burst.
      const unsubscribe =
        signal === undefined
          ? undefined
          : onAbort(signal, () => {
              if (settleMs <= 0 || headersCame) cut();
              else if (settleTimer === undefined) settleTimer = setTimeout(cut, settleMs);
            });
      const finish = (outcome: { ok: true; truncated?: "bytes" | "time" } | { ok: false; err: unknown }) => {
        if (settled) return;
        settled = true;
        unsubscribe?.();
        clearTimeout(bodyTimer);
        clearTimeout(settleTimer);
        if (!outcome.ok) {
          reject(refusal(outcome.err, method));
          return;
        }
        const text =
          chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
        resolve(new Answer(answer, text, outcome.truncated));
      };
      const stopReading = (why: "bytes" | "time"): void => {
        finish({ ok: true, truncated: why });
        // The rest is not wanted: drop the connection (its error is ignored, the answer is out).
        req?.destroy(new Error(`the answer to ${method} was not read to its end (${why})`));
      };
      const onResponse = (res: IncomingMessage): void => {
        answer = res;
        headersCame = true;
        clearTimeout(settleTimer);
        bodyTimer = setTimeout(() => stopReading("time"), answerBodyMs);
        res.on("data", (chunk: Buffer) => {
          if (settled) return;
          const room = maxAnswerBytes - answerBytes;
          answerBytes += chunk.length;
          if (answerBytes > maxAnswerBytes) {
            if (room > 0) chunks.push(chunk.subarray(0, room));
            stopReading("bytes");
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () => finish({ ok: true }));
        res.on("error", (err) => finish({ ok: false, err }));
      };
      try {
        if (this.#closed) throw new TypeError("the worker's HTTP client is closed");
        const target = this.#target(url);
        const to = target.origin;
        // Bytes, not a string: node:http writes a string body in one string with the request's head,
        // UTF-8 encoded, so a Latin-1 character in a header (a job id, a key) would change its bytes.
        const payload =
          body === undefined ? undefined : typeof body === "string" ? Buffer.from(body, "utf8") : body;
        const client = this.#clientFor(to.https);
        req = client.request(
          {
            agent: client.agent,
            hostname: to.hostname,
            port: to.port,
            method,
            path: target.path,
            headers:
              payload === undefined ? headers : { ...headers, "content-length": String(payload.byteLength) },
          },
          onResponse,
        );
        req.on("error", (err) => finish({ ok: false, err }));
        if (answerTimeoutMs !== undefined) {
          // No byte for answerTimeoutMs, waiting for the answer's headers or between its body's bytes.
          req.setTimeout(answerTimeoutMs, () =>
            req?.destroy(
              networkError(`no answer to the ${method} within ${answerTimeoutMs} ms`, "ETIMEDOUT"),
            ),
          );
        }
        req.end(payload);
      } catch (err) {
        // A closed client, or a header, method or path node:http will not send, refuses synchronously.
        finish({ ok: false, err });
      }
    });
  }

  /** Closes idle connections; requests still running are destroyed, and later ones refused. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#http?.agent.destroy();
    this.#https?.agent.destroy();
  }
}
