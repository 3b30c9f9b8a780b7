import type { Dispatcher, Pool } from "undici";
import {
  type Answer,
  AnswerReader,
  type AnswerReaderOptions,
  type CollectLimits,
  type Collector,
  type Hop,
} from "./answer-reader.js";
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
 * Loads undici's Pool alone, not undici's public entry (which costs ~70 ms more CPU to load). Its
 * file is not a public path of undici's, so package.json pins undici's exact release (no range)
 * and test/http/transport-contract.test.ts imports the file and checks the pin; were a release to
 * move it anyway, the public entry is loaded instead (slower to load, the same Pool).
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

/** How this driver's answers are read: the headers' deadline is undici's own, the body timer deferred. */
const READER_OPTIONS: AnswerReaderOptions = Object.freeze({
  clientBoundsHeaders: true,
  deferBodyTimer: true,
});

class UndiciClient implements Collector {
  readonly #dispatcherFor: (origin: string) => Dispatcher;
  readonly #closeAll: () => Promise<void>;
  readonly #targets = new Targets();
  #closed = false;

  constructor(dispatcherFor: (origin: string) => Dispatcher, closeAll: () => Promise<void>) {
    this.#dispatcherFor = dispatcherFor;
    this.#closeAll = closeAll;
  }

  /**
   * One request, the answer collected by the one reader (answer-reader.ts); this driver feeds it
   * from undici's handler calls. undici's `headersTimeout` is a total deadline (bytes read do not
   * refresh it), so the reader sets no timer of its own for the headers: one timer less a post.
   */
  collect(hop: Hop, limits: CollectLimits): Promise<Answer> {
    const reader = new AnswerReader(hop, limits, READER_OPTIONS);
    if (reader.settled) return reader.promise;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        reader.started((reason) => controller.abort(reason));
      },
      onResponseStart(_c, statusCode, headers) {
        // 1xx answers never reach a handler; this is the final answer.
        reader.headers(statusCode, { headers: headers as Answer["headers"] });
      },
      onResponseData(_c, chunk) {
        reader.data(chunk);
      },
      onResponseEnd() {
        reader.end();
      },
      onResponseError(_c, err) {
        reader.error(err);
      },
    };
    try {
      if (this.#closed) throw new TypeError("the HTTP client is closed");
      const target = this.#targets.of(hop.url);
      const { answerTimeoutMs } = limits;
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
      reader.error(err);
    }
    return reader.promise;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#closeAll();
  }
}
