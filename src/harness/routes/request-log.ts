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

/** Bytes counted for a record besides its body, path, query and headers (its object, its fields). */
const RECORD_OVERHEAD_BYTES = 200;

/**
 * The bytes a record is counted as: its body's UTF-8 size (at least what V8 holds it in, for text a
 * worker sends), a byte a character for the rest, and a fixed overhead.
 */
function sizeOf(record: Omit<RecordedRequest, "seq">): number {
  const body = record.body === "" ? 0 : Math.max(record.body.length, record.bodyBytes);
  let bytes = RECORD_OVERHEAD_BYTES + body + record.path.length + record.method.length;
  // for…in over plain records of own string fields: no entry arrays a request.
  const { query, headers } = record;
  for (const k in query) bytes += k.length + query[k]!.length;
  for (const k in headers) bytes += k.length + headers[k]!.length;
  return bytes;
}

/**
 * Worker-route requests in arrival order — the latest `maxRecords`, holding at most `maxBytes`
 * (the oldest dropped), so neither a long-running harness nor large bodies grow it without bound —
 * and the queue of faults per route.
 */
export class RequestLog {
  readonly #records = new Fifo<{ readonly record: RecordedRequest; readonly bytes: number }>();
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
  add(request: Omit<RecordedRequest, "seq">): RecordedRequest {
    let kept = request;
    let bytes = sizeOf(kept);
    if (bytes > this.#maxBytes && kept.body !== "") {
      kept = { ...kept, body: "" };
      bytes = sizeOf(kept);
    }
    const record: RecordedRequest = { seq: this.#seq++, ...kept };
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

  /** Requests in arrival order, optionally filtered (copies, so later answers do not change them). */
  list(filter: RequestFilter = {}): RecordedRequest[] {
    return this.#records
      .toArray()
      .map((r) => r.record)
      .filter(
        (r) =>
          (filter.route === undefined || r.route === filter.route) &&
          (filter.endpointId === undefined || r.endpointId === filter.endpointId),
      )
      .map((r) => ({ ...r }));
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
