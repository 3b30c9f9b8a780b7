import type { ClientRequest, Agent as HttpAgent, IncomingMessage } from "node:http";
import type { LookupFunction, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { onAbort } from "../linked-signal.js";
import {
  type Answer,
  AnswerReader,
  type CollectLimits,
  type Collector,
  type Hop,
  networkError,
} from "./answer-reader.js";
import { asSocket, type Connect } from "./in-memory.js";
import { IDLE_SOCKET_MS, MAX_CONNECTIONS } from "./rules.js";
import { type Target, Targets } from "./targets.js";

/**
 * The transport's node:http client (transport.ts): one request, no redirects. It is the cheap
 * path: node:http is in Node already, so a worker's first take pays nothing to load it, and the
 * heartbeat thread uses nothing else. node:http and node:https come through
 * `process.getBuiltinModule`: a static ESM import makes Node build the module's namespace, whose
 * `WebSocket` getters load Node's own copy of undici (docs/benchmarks.md, "Cold start").
 */

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
  /**
   * Opens each request's connection in memory instead of a socket (in-memory.ts; tests against
   * `Harness.inMemory`): one connection per request, closed after its answer, as without an agent.
   */
  readonly connect?: Connect;
}

/** What a request of one scheme goes through: node:http's or node:https's. */
interface SchemeClient {
  readonly agent: HttpAgent;
  readonly request: typeof import("node:http").request;
}

/** node:http with one keep-alive agent per scheme. */
export class NodeClient implements Collector {
  #http: SchemeClient | undefined;
  #https: SchemeClient | undefined;
  #closed = false;
  readonly #targets = new Targets();
  readonly #options: NodeClientOptions;
  /** The connections in memory still open (`connect`), for close(). */
  readonly #connections = new Set<Duplex>();

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
    const connect = this.#options.connect;
    return client.request(
      {
        ...(connect === undefined
          ? { agent: client.agent }
          : { createConnection: () => this.#inMemory(connect) }),
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
   * One request, the answer collected by the one reader (answer-reader.ts); this driver feeds it.
   * Per-request work is kept small (a streaming job makes one request per chunk): the URL parse is
   * cached, the body collected as Buffers, and one socket timeout stands for the pauses between
   * the answer's bytes.
   */
  collect(hop: Hop, limits: CollectLimits): Promise<Answer> {
    const reader = new AnswerReader(hop, limits);
    if (reader.settled) return reader.promise;
    try {
      const req = this.#start(hop, this.#targets.of(hop.url), (res) => {
        reader.headers(res.statusCode ?? 0, res);
        res.on("data", (chunk: Buffer) => reader.data(chunk));
        res.on("end", () => reader.end());
        res.on("error", (err) => reader.error(err));
      });
      reader.started((reason) => req.destroy(reason));
      req.on("error", (err) => reader.error(err));
      const { answerTimeoutMs } = limits;
      if (answerTimeoutMs !== undefined) {
        // No byte for answerTimeoutMs, waiting for the answer's headers or between its body's bytes
        // (the reader holds the headers to a total deadline besides).
        req.setTimeout(answerTimeoutMs, () =>
          req.destroy(
            networkError(`no answer to the ${hop.method} within ${answerTimeoutMs} ms`, "ETIMEDOUT"),
          ),
        );
      }
      req.end(hop.body);
    } catch (err) {
      // A closed client, or a header, method or path node:http will not send, refuses synchronously.
      reader.error(err);
    }
    return reader.promise;
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
      // The headers' total deadline: a server that trickles them resets no idle timer here.
      const headersLate =
        answerTimeoutMs === undefined
          ? undefined
          : setTimeout(
              () =>
                req?.destroy(
                  networkError(`no answer to the ${hop.method} within ${answerTimeoutMs} ms`, "ETIMEDOUT"),
                ),
              answerTimeoutMs,
            );
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
          clearTimeout(headersLate);
          body = res;
          res.once("close", () => unsubscribe?.());
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
        });
        req.on("error", (err) => {
          if (body === undefined) {
            clearTimeout(headersLate);
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
        clearTimeout(headersLate);
        unsubscribe?.();
        reject(err);
      }
    });
  }

  /** A connection in memory, kept until it closes. */
  #inMemory(connect: Connect): Socket {
    const connection = connect();
    this.#connections.add(connection);
    connection.once("close", () => this.#connections.delete(connection));
    return asSocket(connection);
  }

  /** Closes every connection (requests still running are destroyed), refuses later requests, and resolves once each socket has closed. */
  async close(): Promise<void> {
    this.#closed = true;
    const sockets: Array<Socket | Duplex> = [...this.#connections];
    for (const connection of this.#connections) connection.destroy();
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
