import type { Dispatcher, Pool } from "undici";
import { onAbort } from "../linked-signal.js";
import type { Answer, CollectLimits, Collector, Hop } from "./node-client.js";
import { IDLE_SOCKET_MS, MAX_CONNECTIONS } from "./rules.js";
import { Targets } from "./targets.js";

/**
 * The transport's fast path for answers read whole: undici's `Pool` driven through `dispatch`
 * with a handler that collects the body, no stream in between. At 64 requests in flight it costs
 * about 60 % of node:http's CPU per request (docs/benchmarks.md, "One transport (issue 43)"),
 * but loading it costs ~25 ms of CPU and ~15 MiB (its llhttp WebAssembly), so the worker loads it in the
 * background once idle (transport.ts, `warmUp`), never before its first take nor on a job's time.
 * Only answers read whole come here: a body the caller streams stays on node:http (undici 8
 * fails a keep-alive answer whose server closes after the body while the reader is slow).
 */

/**
 * Loads undici's Pool alone, not undici's public entry. Its file is not a public path of undici's:
 * where a release has moved it, the public entry is loaded instead (slower to load, the same
 * Pool); test/http/transport-contract.test.ts runs on the file itself.
 */
export async function loadUndiciClient(): Promise<Collector> {
  const PoolClass = await import("undici/lib/dispatcher/pool.js").then(
    (m) => m.default,
    () => import("undici").then((m) => m.Pool),
  );
  const pools = new Map<string, Pool>();
  return new UndiciClient(
    (origin) => {
      let pool = pools.get(origin);
      if (pool === undefined) {
        pool = new PoolClass(origin, {
          connections: MAX_CONNECTIONS,
          pipelining: 1,
          keepAliveTimeout: IDLE_SOCKET_MS,
          keepAliveMaxTimeout: IDLE_SOCKET_MS,
        });
        pools.set(origin, pool);
      }
      return pool;
    },
    async () => {
      await Promise.all([...pools.values()].map((p) => p.destroy().catch(() => undefined)));
    },
  );
}

/**
 * The same collector over a dispatcher the caller owns (the job API and management clients: a
 * proxy agent, a mock agent, undici's global dispatcher). Closing it leaves the dispatcher open.
 */
export function dispatcherClient(dispatcher: Dispatcher): Collector {
  return new UndiciClient(
    () => dispatcher,
    async () => undefined,
  );
}

class UndiciAnswer implements Answer {
  readonly status: number;
  readonly headers: Answer["headers"];
  readonly text: string;
  readonly truncated?: "bytes" | "time";
  constructor(
    status: number,
    headers: Answer["headers"],
    text: string,
    truncated: "bytes" | "time" | undefined,
  ) {
    this.status = status;
    this.headers = headers;
    this.text = text;
    if (truncated !== undefined) this.truncated = truncated;
  }
}

class UndiciClient implements Collector {
  readonly #dispatcherFor: (origin: string) => Dispatcher;
  readonly #closeAll: () => Promise<void>;
  readonly #targets = new Targets();
  #closed = false;

  constructor(dispatcherFor: (origin: string) => Dispatcher, closeAll: () => Promise<void>) {
    this.#dispatcherFor = dispatcherFor;
    this.#closeAll = closeAll;
  }

  collect(hop: Hop, limits: CollectLimits): Promise<Answer> {
    const { signal, answerTimeoutMs, maxAnswerBytes, answerBodyMs, settleMs } = limits;
    return new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      let headers: Answer["headers"] = {};
      let headersCame = false;
      let settled = false;
      let cutReason: unknown;
      const chunks: Buffer[] = [];
      let answerBytes = 0;
      let bodyTimer: NodeJS.Timeout | undefined;
      let settleTimer: NodeJS.Timeout | undefined;
      const cut = (): void => {
        if ((headersCame && !limits.abortBody) || signal === undefined || settled) return;
        cutReason = signal.reason;
        // Settled here: the reason is the signal's, whatever undici reports for the abort.
        finish({ ok: false, err: signal.reason });
        controller?.abort(signal.reason as Error);
      };
      const onAbortSignal = (): void => {
        if (settleMs <= 0 || headersCame) cut();
        else if (settleTimer === undefined) settleTimer = setTimeout(cut, settleMs);
      };
      // One listener per signal however many requests share it (every in-flight post shares the
      // worker's give-up signal), as in the node:http client.
      const unsubscribe = signal === undefined ? undefined : onAbort(signal, onAbortSignal);
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
        resolve(new UndiciAnswer(status, headers, text, outcome.truncated));
      };
      const armBodyTimer = (): void => {
        if (!settled) bodyTimer = setTimeout(() => stopReading("time"), answerBodyMs);
      };
      const stopReading = (why: "bytes" | "time"): void => {
        finish({ ok: true, truncated: why });
        controller?.abort(new Error(`the answer to ${hop.method} was not read to its end (${why})`));
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (cutReason !== undefined) c.abort(cutReason as Error);
        },
        onResponseStart(_c, statusCode, answerHeaders) {
          // 1xx answers never reach a handler; this is the final answer.
          status = statusCode;
          headers = answerHeaders as Answer["headers"];
          headersCame = true;
          clearTimeout(settleTimer);
          // Armed after the bytes at hand are parsed: a short answer has ended by then, and needs
          // no timer set and cleared (a token stream's every post).
          if (Number.isFinite(answerBodyMs)) queueMicrotask(armBodyTimer);
        },
        onResponseData(_c, chunk) {
          if (settled) return;
          const room = maxAnswerBytes - answerBytes;
          answerBytes += chunk.length;
          if (answerBytes > maxAnswerBytes) {
            if (room > 0) chunks.push(chunk.subarray(0, room));
            stopReading("bytes");
            return;
          }
          chunks.push(chunk);
        },
        onResponseEnd() {
          finish({ ok: true });
        },
        onResponseError(_c, err) {
          finish({ ok: false, err });
        },
      };
      try {
        if (this.#closed) throw new TypeError("the HTTP client is closed");
        const target = this.#targets.of(hop.url);
        this.#dispatcherFor(target.origin.text).dispatch(
          {
            origin: target.origin.text,
            method: hop.method as Dispatcher.HttpMethod,
            path: target.path,
            headers: hop.headers as Record<string, string>,
            body: hop.body === undefined ? null : (hop.body as Buffer),
            // 0: no bound (long polls end on their signal).
            headersTimeout: answerTimeoutMs ?? 0,
            bodyTimeout: answerTimeoutMs ?? 0,
          },
          handler,
        );
      } catch (err) {
        finish({ ok: false, err });
      }
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#closeAll();
  }
}
