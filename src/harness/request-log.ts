import { Fifo } from "../fifo.js";

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
  | { readonly status: number; readonly retryAfterSec?: number; readonly body?: string }
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
  /** The raw body text ("" for none). */
  readonly body: string;
  /** The status answered, "dropped" when the connection was cut, "pending" while held open. */
  status: number | "dropped" | "pending";
}

/** Filter of {@link RequestLog.list}. */
export interface RequestFilter {
  readonly route?: WorkerRoute;
  readonly endpointId?: string;
}

/**
 * Worker-route requests in arrival order (the latest `maxRecords`, so a long-running harness does
 * not grow without bound), and the queue of faults per route.
 */
export class RequestLog {
  readonly #records = new Fifo<RecordedRequest>();
  readonly #faults = new Map<WorkerRoute, Fault[]>();
  readonly #maxRecords: number;
  #seq = 0;

  constructor(maxRecords: number) {
    this.#maxRecords = maxRecords;
  }

  /** Adds a request; the caller sets `status` once answered. */
  add(record: Omit<RecordedRequest, "seq">): RecordedRequest {
    const full: RecordedRequest = { seq: this.#seq++, ...record };
    this.#records.push(full);
    if (this.#records.size > this.#maxRecords) this.#records.shift();
    return full;
  }

  /** Requests in arrival order, optionally filtered (copies, so later answers do not change them). */
  list(filter: RequestFilter = {}): RecordedRequest[] {
    return this.#records
      .toArray()
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
