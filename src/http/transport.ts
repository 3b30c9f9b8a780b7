import type { LookupFunction } from "node:net";
import { RunletError } from "../errors.js";
import { settle } from "../task-sink.js";
import type { Answer, CollectLimits, Collector, HeaderSource, Hop } from "./answer-reader.js";
import type { Connect } from "./in-memory.js";
import { NodeClient, type Opened } from "./node-client.js";
import {
  DEFAULT_ANSWER_BODY_MS,
  DEFAULT_MAX_ANSWER_BYTES,
  keepsCredential,
  MAX_REDIRECTS,
  redirectTarget,
  shownOrigin,
} from "./rules.js";

/**
 * The one HTTP layer of everything runlet's worker sends (docs/benchmarks.md, "One transport (issue 43)"): the
 * platform's posts, job-take and job-stop, the pings of the heartbeat thread, URL downloads, the
 * sidecar's readiness probe and the relay. One redirect rule ({@link keepsCredential}: the
 * credential goes to the same origin or its https upgrade only), one set of bounds (rules.ts), one
 * abort path (the caller's signal). Two HTTP clients sit under it: node:http, in Node already, for
 * a cheap start and for bodies the caller streams; and undici's Pool, loaded on demand
 * ({@link HttpTransport.warmUp}) for answers read whole, at about half the CPU per request.
 * `test/http/transport-contract.test.ts` holds both to the same contract.
 */

export type { Answer, Collector } from "./answer-reader.js";
export type { Opened } from "./node-client.js";

/** Options of one request whose answer is read whole. */
export interface RequestOptions {
  /** Headers of this request (lower-case names); `authorization` here is subject to the redirect rule too. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Cuts the request short; once the answer's headers came it is read (bounded) instead. */
  readonly signal?: AbortSignal;
  /** Longest wait for the headers, and then between body bytes, ms. @default none */
  readonly answerTimeoutMs?: number;
  /** Past it the rest is not read and the answer says `truncated: "bytes"`. @default {@link DEFAULT_MAX_ANSWER_BYTES} */
  readonly maxAnswerBytes?: number;
  /** Longest read of the body once the headers came, ms; then `truncated: "time"`. @default {@link DEFAULT_ANSWER_BODY_MS} */
  readonly answerBodyMs?: number;
  /** When `signal` aborts before the headers came, wait this long for them first, ms. @default 0 */
  readonly settleMs?: number;
  /** Follow redirects (the default), or return a 3xx as the answer. */
  readonly redirects?: "follow" | "none";
  /** `signal` cuts the body too, not only the wait for the headers. @default false */
  readonly abortBody?: boolean;
}

/** Options of one request whose body the caller reads ({@link HttpTransport.open}). */
export interface OpenOptions {
  readonly method?: "GET" | "POST";
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Cuts the request at any point, its body included. */
  readonly signal?: AbortSignal;
  /** Longest wait for the headers, and each pause between body bytes, ms. @default none */
  readonly answerTimeoutMs?: number;
  /** Follow redirects (the default), or return a 3xx as the answer. */
  readonly redirects?: "follow" | "none";
}

/** Settings of one transport. */
export interface TransportOptions {
  /** The `Authorization` value sent with every request, to the first URL's origin and where {@link keepsCredential} allows. */
  readonly credential?: string;
  /** The `User-Agent` sent with every request. */
  readonly userAgent?: string;
  /** Keep connections for later requests. @default true */
  readonly keepAlive?: boolean;
  /** Resolves host names: the private-address guard of downloads refuses there. */
  readonly lookup?: LookupFunction;
  /** Called before each hop, redirects included; throws to refuse it (a private address written as a literal). */
  readonly checkHop?: (url: URL) => void;
  /** What the transport says it is in messages ("the platform's", "the download's"). */
  readonly name?: string;
  /**
   * Loads the fast client for answers read whole ({@link HttpTransport.warmUp}). Given by the
   * worker's main thread; the heartbeat thread has none and stays on node:http.
   */
  readonly loadFastClient?: () => Promise<Collector>;
  /**
   * The client for answers read whole from the start, instead of node:http: the job API and
   * management clients pass {@link dispatcherClient} over their dispatcher.
   */
  readonly client?: Collector;
  /**
   * Opens every connection in memory instead of a socket (in-memory.ts): tests pass a harness's
   * `connect` (`Harness.inMemory`). Everything then goes through node:http, one connection per
   * request: `client`, `loadFastClient` and `lookup` (no host name is resolved) are not used;
   * `checkHop` still is.
   */
  readonly connect?: Connect;
}

/** True for a request the HTTP client refused before sending it: sending it again fails the same way. */
export function isRefusedRequest(err: unknown): boolean {
  return err instanceof RunletError && err.code === "RUNLET_REQUEST_REFUSED";
}

/**
 * An error for a request the client will not send (a header value, method or path it cannot
 * carry: node:http's ERR_INVALID_CHAR and friends are TypeErrors; undici's is
 * UND_ERR_INVALID_ARG), or a request after close().
 */
function refusal(err: unknown, method: string): unknown {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (!(err instanceof TypeError) && code !== "UND_ERR_INVALID_ARG") return err;
  return new RunletError(
    "RUNLET_REQUEST_REFUSED",
    `the HTTP client refused the ${method} before sending it: ${(err as Error).message}`,
    { cause: err },
  );
}

const encoder = new TextEncoder();

/** Sends requests by the transport's rules; see the module's comment. */
export class HttpTransport {
  readonly #node: NodeClient;
  #fast: Collector | undefined;
  #warming: Promise<boolean> | undefined;
  #closed = false;
  readonly #options: TransportOptions;
  /** The headers every request starts from (user agent, credential), built once. */
  readonly #base: Readonly<Record<string, string>>;
  /** The last merge of {@link headers}. */
  #merged:
    | { readonly extra: Readonly<Record<string, string>>; readonly headers: Readonly<Record<string, string>> }
    | undefined;

  constructor(options: TransportOptions = {}) {
    this.#options = options;
    this.#node = new NodeClient({
      ...(options.keepAlive === undefined ? {} : { keepAlive: options.keepAlive }),
      ...(options.lookup === undefined ? {} : { lookup: options.lookup }),
      ...(options.connect === undefined ? {} : { connect: options.connect }),
    });
    this.#fast = options.connect === undefined ? options.client : undefined;
    const base: Record<string, string> = {};
    if (options.userAgent !== undefined) base["user-agent"] = options.userAgent;
    if (options.credential !== undefined) base["authorization"] = options.credential;
    this.#base = Object.freeze(base);
  }

  /**
   * The headers of a request: the transport's, then the caller's. The merge of the last `extra`
   * object is kept: a caller that passes the same object again (a job's stream posts) gets the
   * same merged one. Header objects are never changed once made.
   */
  headers(extra: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> {
    if (extra === undefined) return this.#base;
    if (this.#merged?.extra !== extra) this.#merged = { extra, headers: { ...this.#base, ...extra } };
    return this.#merged.headers;
  }

  /** Which client reads answers whole now. */
  get client(): "node:http" | "undici" {
    return this.#fast === undefined ? "node:http" : "undici";
  }

  /**
   * Loads the fast client in the background; once it is loaded, answers read whole go through it.
   * Resolves true when it is in use, false when there is none to load or loading failed (the
   * transport stays on node:http, which serves every request either way). Call it when the worker
   * is idle: loading costs the event loop ~30 ms.
   */
  warmUp(): Promise<boolean> {
    const load = this.#options.loadFastClient;
    if (load === undefined || this.#options.connect !== undefined || this.#closed)
      return Promise.resolve(false);
    this.#warming ??= load().then(
      (client) => {
        if (this.#closed) {
          // Loaded after close(): it served nothing, so its close's failure has nothing to tell.
          settle(client.close(), () => undefined);
          return false;
        }
        this.#fast = client;
        return true;
      },
      () => false,
    );
    return this.#warming;
  }

  /** One request, its answer read whole; follows redirects by the rule. Throws on network errors and aborts; any status is an answer. */
  request(method: string, url: string, options: RequestOptions = {}): Promise<Answer> {
    const limits: CollectLimits = {
      signal: options.signal,
      answerTimeoutMs: options.answerTimeoutMs,
      maxAnswerBytes: options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES,
      answerBodyMs: options.answerBodyMs ?? DEFAULT_ANSWER_BODY_MS,
      settleMs: options.settleMs ?? 0,
      ...(options.abortBody === undefined ? {} : { abortBody: options.abortBody }),
    };
    return this.#dispatch(method, url, options, (hop) => (this.#fast ?? this.#node).collect(hop, limits));
  }

  /**
   * One request whose body the caller reads (a download, a relayed stream), through node:http;
   * follows redirects by the rule (a redirect's own body is dropped). Resolves when the final
   * answer's headers came; the caller reads or destroys `body`. `signal` cuts it at any point.
   */
  async open(url: string, options: OpenOptions = {}): Promise<Opened & { readonly url: string }> {
    const limits = { signal: options.signal, answerTimeoutMs: options.answerTimeoutMs };
    let last = url;
    const opened = await this.#dispatch(
      options.method ?? "GET",
      url,
      options,
      (hop) => {
        last = hop.url;
        return this.#node.open(hop, limits);
      },
      (dropped) => {
        dropped.body.on("error", () => undefined);
        dropped.body.destroy();
      },
    );
    return { ...opened, url: last };
  }

  /**
   * The one hop loop of both kinds of request: each hop checked, sent by `send`, and its answer
   * either returned or, for a redirect the rule follows, let go (`drop`) for the next hop. A
   * client's refusal to send becomes RUNLET_REQUEST_REFUSED.
   */
  async #dispatch<A extends { readonly status: number } & HeaderSource>(
    method: string,
    url: string,
    options: {
      readonly headers?: Readonly<Record<string, string>>;
      readonly body?: string | Uint8Array;
      readonly signal?: AbortSignal;
      readonly redirects?: "follow" | "none";
    },
    send: (hop: Hop) => Promise<A>,
    drop?: (answer: A) => void,
  ): Promise<A> {
    const body = typeof options.body === "string" ? encoder.encode(options.body) : options.body;
    let hop: Hop = { method, url, headers: this.headers(options.headers), body };
    for (let hops = 0; ; hops++) {
      this.#check(hop.url);
      let answer: A;
      try {
        answer = await send(hop);
      } catch (err) {
        throw refusal(err, method);
      }
      const next = options.redirects === "none" ? undefined : this.#next(hop, answer.status, answer, hops);
      if (next === undefined) return answer;
      drop?.(answer);
      if (options.signal?.aborted) throw options.signal.reason;
      hop = next;
    }
  }

  #check(url: string): void {
    if (this.#options.checkHop !== undefined) this.#options.checkHop(new URL(url));
  }

  /** The next hop of a redirect answer, by the rule; undefined when the answer is the answer. */
  #next(hop: Hop, status: number, answer: HeaderSource, hops: number): Hop | undefined {
    // Headers are read only for a redirect status: node:http builds an answer's header object on first read.
    if (status < 301 || status > 308) return undefined;
    const current = new URL(hop.url);
    const next = redirectTarget(status, answer.headers["location"], current);
    if (next === undefined) return undefined;
    if (hops >= MAX_REDIRECTS) {
      // Not an answer to act on (a result must not be replaced by an error for it): a network error.
      throw new RunletError(
        "RUNLET_REQUEST_REDIRECTS",
        `the ${hop.method} was redirected more than ${MAX_REDIRECTS} times (last to ${shownOrigin(next)})`,
        { details: { status } },
      );
    }
    let headers = hop.headers;
    if (headers["authorization"] !== undefined && !keepsCredential(current, next)) {
      const { authorization: _dropped, ...rest } = headers;
      headers = rest;
    }
    return { method: hop.method, url: next.href, headers, body: hop.body };
  }

  /**
   * Closes every connection (requests still running are destroyed) and refuses later requests.
   * Resolves once each connection has closed and the event loop has turned once more, so that a
   * server in this process (the harness under a test, or beside `runlet dev`) has read each
   * hang-up by then: a take cut a moment before would otherwise still look held to it, and a job
   * handed to it would go to a connection nobody reads.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([this.#node.close(), this.#fast?.close()]);
    await new Promise(setImmediate);
  }
}
