import { Fifo } from "../../fifo.js";

/** The worker-facing routes (docs/protocol.md, "Taking jobs" to "Heartbeat"). */
export const WORKER_ROUTES = [
  "job-take",
  "job-take-batch",
  "job-done",
  "job-stream",
  "job-stop",
  "ping",
] as const;
export type WorkerRoute = (typeof WORKER_ROUTES)[number];

/** True when `name` is a worker route. */
export function isWorkerRoute(name: string | undefined): name is WorkerRoute {
  return (WORKER_ROUTES as readonly string[]).includes(name ?? "");
}

/**
 * A fault injected into the next requests of a worker route: answer a status without applying
 * the request, delay then handle normally, or drop the connection without an answer.
 */
export type Fault =
  | {
      readonly status: number;
      readonly retryAfterSec?: number;
      readonly body?: string;
      /** Sent as the answer's `Location` (a redirect: 307, 308). */
      readonly location?: string;
    }
  | { readonly delayMs: number }
  | { readonly drop: true };

/** One worker-route request as it arrived (before any fault), and what the harness answered. */
export interface RecordedRequest {
  /** Arrival number, from 0; stays unique when old records are dropped. */
  readonly seq: number;
  readonly route: WorkerRoute;
  readonly endpointId: string;
  readonly method: string;
  /** The path, without the query. */
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The raw body text: "" for none, for a request refused before its body was read (a wrong key,
   * say), for one over its limit, and for one too large to keep in the log at all.
   */
  readonly body: string;
  /** The body's size as received, bytes (0 when it was never read). */
  readonly bodyBytes: number;
  /** The status answered, "dropped" when the connection was cut, "pending" while held open. */
  status: number | "dropped" | "pending";
}

/** Filter of {@link RequestLog.list}. */
export interface RequestFilter {
  readonly route?: WorkerRoute;
  readonly endpointId?: string;
}

/**
 * A request as the log keeps it until it is listed. Kept as node:http gave it: the request's own
 * header object (lower-case names; a repeated header can be an array) and the query string, not
 * copies. Building the listed record's `headers` and `query` per request cost a few µs and a
 * scavenge's worth of objects per thousand stream posts (docs/benchmarks.md, "One transport
 * (issue 43)"); {@link RequestLog.list} builds them when asked.
 */
export interface RequestArrival {
  readonly route: WorkerRoute;
  readonly endpointId: string;
  readonly method: string;
  /** The path, without the query. */
  readonly path: string;
  /** The query string with its `?` (URL#search), "" for none. */
  readonly search: string;
  /** The request's headers as node:http parsed them (`IncomingMessage#headers`); not changed later. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly body: string;
  readonly bodyBytes: number;
}

/** A logged request; its route sets `status` once answered. */
export interface LogEntry extends RequestArrival {
  readonly seq: number;
  status: RecordedRequest["status"];
}

/** Bytes counted for a record besides its body, path, query and headers (its object, its fields). */
const RECORD_OVERHEAD_BYTES = 200;

/**
 * The bytes a record is counted as: its body's UTF-8 size (at least what V8 holds it in, for text a
 * worker sends), a byte a character for the rest, and a fixed overhead.
 */
function sizeOf(arrival: RequestArrival): number {
  const body = arrival.body === "" ? 0 : Math.max(arrival.body.length, arrival.bodyBytes);
  let bytes =
    RECORD_OVERHEAD_BYTES + body + arrival.path.length + arrival.method.length + arrival.search.length;
  // for…in over plain records of own fields: no entry arrays a request.
  const { headers } = arrival;
  for (const k in headers) {
    const v = headers[k];
    if (typeof v === "string") bytes += k.length + v.length;
    else if (v !== undefined) for (const one of v) bytes += k.length + one.length;
  }
  return bytes;
}

/** Query parameters of a query string as a plain record (last value wins). */
function queryOf(search: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (search !== "") for (const [k, v] of new URLSearchParams(search)) out[k] = v;
  return out;
}

/** Header values as strings (a repeated header joined with ", ", as node:http joins most). */
function flatHeaders(headers: RequestArrival["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in headers) {
    const v = headers[k];
    if (v !== undefined) out[k] = typeof v === "string" ? v : v.join(", ");
  }
  return out;
}

/** The listed form of an entry: a fresh object, so later answers do not change it. */
function listed(entry: LogEntry): RecordedRequest {
  return {
    seq: entry.seq,
    route: entry.route,
    endpointId: entry.endpointId,
    method: entry.method,
    path: entry.path,
    query: queryOf(entry.search),
    headers: flatHeaders(entry.headers),
    body: entry.body,
    bodyBytes: entry.bodyBytes,
    status: entry.status,
  };
}

/**
 * Worker-route requests in arrival order — the latest `maxRecords`, holding at most `maxBytes`
 * (the oldest dropped), so neither a long-running harness nor large bodies grow it without bound —
 * and the queue of faults per route.
 */
export class RequestLog {
  readonly #records = new Fifo<{ readonly record: LogEntry; readonly bytes: number }>();
  readonly #faults = new Map<WorkerRoute, Fault[]>();
  readonly #maxRecords: number;
  readonly #maxBytes: number;
  #bytes = 0;
  #seq = 0;

  constructor(maxRecords: number, maxBytes: number) {
    this.#maxRecords = maxRecords;
    this.#maxBytes = maxBytes;
  }

  /** Records kept and the bytes they are counted as (at most the bound given). */
  get size(): { readonly records: number; readonly bytes: number } {
    return { records: this.#records.size, bytes: this.#bytes };
  }

  /**
   * Adds a request; the caller sets `status` once answered. A record that alone is over the byte
   * bound is kept without its body.
   */
  add(request: RequestArrival): LogEntry {
    let kept = request;
    let bytes = sizeOf(kept);
    if (bytes > this.#maxBytes && kept.body !== "") {
      kept = { ...kept, body: "" };
      bytes = sizeOf(kept);
    }
    const record: LogEntry = { seq: this.#seq++, ...kept, status: "pending" };
    this.#records.push({ record, bytes });
    this.#bytes += bytes;
    while (
      this.#records.size > this.#maxRecords ||
      (this.#bytes > this.#maxBytes && this.#records.size > 1)
    ) {
      this.#bytes -= this.#records.shift()!.bytes;
    }
    return record;
  }

  /** Requests in arrival order, optionally filtered (fresh records, so later answers do not change them). */
  list(filter: RequestFilter = {}): RecordedRequest[] {
    return this.#records
      .toArray()
      .map((r) => r.record)
      .filter(
        (r) =>
          (filter.route === undefined || r.route === filter.route) &&
          (filter.endpointId === undefined || r.endpointId === filter.endpointId),
      )
      .map(listed);
  }

  /** Queues `fault` for the next `count` requests of `route`. */
  inject(route: WorkerRoute, fault: Fault, count: number): void {
    if (!isWorkerRoute(route)) throw new RangeError(`injectFault: unknown route "${String(route)}"`);
    if (!Number.isInteger(count) || count < 1) {
      throw new RangeError(`injectFault: count must be an integer ≥ 1, got ${count}`);
    }
    const list = this.#faults.get(route) ?? [];
    for (let i = 0; i < count; i++) list.push(fault);
    this.#faults.set(route, list);
  }

  /** Takes the next fault queued for `route`, if any. */
  nextFault(route: WorkerRoute): Fault | undefined {
    return this.#faults.get(route)?.shift();
  }
}
