import type { ClientRequest, Agent as HttpAgent, IncomingMessage } from "node:http";
import type { LookupFunction, Socket } from "node:net";
import { onAbort } from "../linked-signal.js";
import { IDLE_SOCKET_MS, MAX_CONNECTIONS } from "./rules.js";
import { type Target, Targets } from "./targets.js";

/**
 * The transport's node:http client (transport.ts): one request, no redirects. It is the cheap
 * path: node:http is in Node already, so a worker's first take pays nothing to load it, and the
 * heartbeat thread uses nothing else. node:http and node:https come through
 * `process.getBuiltinModule`: a static ESM import makes Node build the module's namespace, whose
 * `WebSocket` getters load Node's own copy of undici (docs/benchmarks.md, "Cold start").
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
  /** Longest wait for the headers, and then between body bytes, ms; undefined: none (long polls). */
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

/** An answer read whole (or as far as its bounds allow). */
export interface Answer {
  readonly status: number;
  /** Lower-case names; made on first read. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
  /** Set when the body was not read to its end: past `maxAnswerBytes` or `answerBodyMs`. */
  readonly truncated?: "bytes" | "time";
}

/** What reads answers whole: this node:http client, or the undici one once loaded. */
export interface Collector {
  collect(hop: Hop, limits: CollectLimits): Promise<Answer>;
  close(): Promise<void>;
}

/** An answer whose body is read by the caller ({@link NodeClient.open}). */
export interface Opened {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body; destroy it to drop the rest. */
  readonly body: IncomingMessage;
}

/** Settings of one client. */
export interface NodeClientOptions {
  /** Keep connections for later requests. @default true */
  readonly keepAlive?: boolean;
  /** Resolves host names (the private-address guard of downloads). */
  readonly lookup?: LookupFunction;
  readonly maxConnections?: number;
}

/** What a request of one scheme goes through: node:http's or node:https's. */
interface SchemeClient {
  readonly agent: HttpAgent;
  readonly request: typeof import("node:http").request;
}

/** An error with a network code, as node:http's own errors have (the retry policy reads `code`). */
export function networkError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/** An answer whose header object is made only when read (node:http builds it on first read). */
class NodeAnswer implements Answer {
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

  get headers(): Answer["headers"] {
    return this.#message?.headers ?? {};
  }
}

/** node:http with one keep-alive agent per scheme. */
export class NodeClient implements Collector {
  #http: SchemeClient | undefined;
  #https: SchemeClient | undefined;
  #closed = false;
  readonly #targets = new Targets();
  readonly #options: NodeClientOptions;

  constructor(options: NodeClientOptions = {}) {
    this.#options = options;
  }

  /**
   * A scheme's agent and request function, made once. Keep-alive, at most `maxConnections` sockets
   * (more requests queue for one). An idle socket closes after {@link IDLE_SOCKET_MS}, or a
   * second before the server's `Keep-Alive: timeout` when that is sooner (node:http reads the hint
   * only when the agent has a timeout of its own). The agent's timeout closes idle sockets only.
   */
  #clientFor(https: boolean): SchemeClient {
    const known = https ? this.#https : this.#http;
    if (known !== undefined) return known;
    const module = process.getBuiltinModule(https ? "node:https" : "node:http");
    const max = this.#options.maxConnections ?? MAX_CONNECTIONS;
    const client: SchemeClient = {
      agent: new module.Agent({
        keepAlive: this.#options.keepAlive ?? true,
        timeout: IDLE_SOCKET_MS,
        maxSockets: max,
        maxFreeSockets: max,
      }),
      request: module.request,
    };
    if (https) this.#https = client;
    else this.#http = client;
    return client;
  }

  /** Starts `hop`; throws synchronously (a TypeError) for a request node:http will not send. */
  #start(hop: Hop, target: Target, onResponse: (res: IncomingMessage) => void): ClientRequest {
    if (this.#closed) throw new TypeError("the HTTP client is closed");
    const to = target.origin;
    const client = this.#clientFor(to.https);
    const headers =
      hop.body === undefined
        ? hop.headers
        : { ...hop.headers, "content-length": String(hop.body.byteLength) };
    return client.request(
      {
        agent: client.agent,
        hostname: to.hostname,
        port: to.port,
        method: hop.method,
        path: target.path,
        headers,
        ...(this.#options.lookup === undefined ? {} : { lookup: this.#options.lookup }),
      },
      onResponse,
    );
  }

  /**
   * One request, the answer collected. Per-request work is kept small (a streaming job makes one
   * request per chunk): the URL parse is cached, the body collected as Buffers, and one socket
   * timeout stands for the answer's header and body timers.
   */
  collect(hop: Hop, limits: CollectLimits): Promise<Answer> {
    const { signal, answerTimeoutMs, maxAnswerBytes, answerBodyMs, settleMs } = limits;
    return new Promise<Answer>((resolve, reject) => {
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
        // Once the headers came the answer is the server's: read it (bounded) rather than drop it,
        // unless the caller wants the body cut too.
        if ((headersCame && !limits.abortBody) || signal === undefined) return;
        finish({ ok: false, err: signal.reason });
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
          reject(outcome.err);
          return;
        }
        const text =
          chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
        resolve(new NodeAnswer(answer, text, outcome.truncated));
      };
      const stopReading = (why: "bytes" | "time"): void => {
        finish({ ok: true, truncated: why });
        // The rest is not wanted: drop the connection (its error is ignored, the answer is out).
        req?.destroy(new Error(`the answer to ${hop.method} was not read to its end (${why})`));
      };
      const onResponse = (res: IncomingMessage): void => {
        answer = res;
        headersCame = true;
        clearTimeout(settleTimer);
        if (Number.isFinite(answerBodyMs)) bodyTimer = setTimeout(() => stopReading("time"), answerBodyMs);
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
        req = this.#start(hop, this.#targets.of(hop.url), onResponse);
        req.on("error", (err) => finish({ ok: false, err }));
        if (answerTimeoutMs !== undefined) {
          // No byte for answerTimeoutMs, waiting for the answer's headers or between its body's bytes.
          req.setTimeout(answerTimeoutMs, () =>
            req?.destroy(
              networkError(`no answer to the ${hop.method} within ${answerTimeoutMs} ms`, "ETIMEDOUT"),
            ),
          );
        }
        req.end(hop.body);
      } catch (err) {
        // A closed client, or a header, method or path node:http will not send, refuses synchronously.
        finish({ ok: false, err });
      }
    });
  }

  /**
   * One request whose body the caller reads: resolves when the headers came. `signal` cuts it at
   * any point, the body included (the body then errors with the signal's reason); `answerTimeoutMs`
   * bounds the wait for the headers and each pause between body bytes.
   */
  open(
    hop: Hop,
    options: { signal: AbortSignal | undefined; answerTimeoutMs: number | undefined },
  ): Promise<Opened> {
    const { signal, answerTimeoutMs } = options;
    return new Promise<Opened>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let req: ClientRequest | undefined;
      let body: IncomingMessage | undefined;
      const unsubscribe =
        signal === undefined
          ? undefined
          : onAbort(signal, () => {
              // Before the headers the request fails with the reason; after, the body does.
              if (body !== undefined) body.destroy(signal.reason);
              req?.destroy(signal.reason);
            });
      try {
        req = this.#start(hop, this.#targets.of(hop.url), (res) => {
          body = res;
          res.once("close", () => unsubscribe?.());
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
        });
        req.on("error", (err) => {
          if (body === undefined) {
            unsubscribe?.();
            reject(err);
          } else if (!body.destroyed) body.destroy(err);
        });
        if (answerTimeoutMs !== undefined) {
          req.setTimeout(answerTimeoutMs, () =>
            req?.destroy(
              networkError(
                `no byte of the answer to the ${hop.method} for ${answerTimeoutMs} ms`,
                "ETIMEDOUT",
              ),
            ),
          );
        }
        req.end(hop.body);
      } catch (err) {
        unsubscribe?.();
        reject(err);
      }
    });
  }

  /** Closes every connection (requests still running are destroyed), refuses later requests, and resolves once each socket has closed. */
  async close(): Promise<void> {
    this.#closed = true;
    const sockets: Socket[] = [];
    for (const client of [this.#http, this.#https]) {
      if (client === undefined) continue;
      for (const list of [client.agent.sockets, client.agent.freeSockets]) {
        for (const held of Object.values(list)) sockets.push(...(held ?? []));
      }
      client.agent.destroy();
    }
    await Promise.all(
      sockets.filter((s) => !s.closed).map((s) => new Promise((resolve) => s.once("close", resolve))),
    );
  }
}
