import type { Fault, Harness, RecordedRequest, WorkerRoute } from "../../src/harness/index.js";
import { seededRandom } from "./helpers.js";

/**
 * A seeded random fault injector over the harness's count-based `injectFault`. Each watched
 * route gets its own seeded sequence of `perRoute` entries, queued in full before the first
 * request: a draw under `rate` is a fault (429, 500, 503, a dropped connection or a delay),
 * anything else is `{ delayMs: 0 }`, which the harness handles normally.
 *
 * The harness hands the n-th request of a route the n-th queued entry, so which request meets
 * which fault depends only on the seed and the order of that route's requests, never on timing
 * (a queue topped up by a timer depended on how the top-ups fell between requests, and could run
 * dry). {@link mismatches} checks that every request met its drawn fault.
 */
export class SeededFaults {
  readonly #drawn = new Map<WorkerRoute, readonly Fault[]>();

  constructor(
    harness: Harness,
    routes: readonly WorkerRoute[],
    options: { readonly rate: number; readonly seed: number; readonly perRoute: number },
  ) {
    for (const [index, route] of routes.entries()) {
      const random = seededRandom(options.seed * 1_000 + index);
      const drawn = Array.from({ length: options.perRoute }, () => draw(random, options.rate));
      for (const fault of drawn) harness.injectFault(route, fault);
      this.#drawn.set(route, drawn);
    }
  }

  /** The entries queued for `route`, in the order its requests consume them. */
  drawn(route: WorkerRoute): readonly Fault[] {
    return this.#drawn.get(route) ?? [];
  }

  /** Where in `route`'s sequence the first answered fault (a status or a drop) is; -1 if none. */
  firstFault(route: WorkerRoute): number {
    return this.drawn(route).findIndex(isAnswered);
  }

  /**
   * The requests of `route` (all of them, in arrival order) that did not get the fault drawn for
   * their place, described; also one entry if there were more requests than drawn entries.
   */
  mismatches(route: WorkerRoute, requests: readonly RecordedRequest[]): string[] {
    const drawn = this.drawn(route);
    const out: string[] = [];
    if (requests.length > drawn.length)
      out.push(`${route}: ${requests.length} requests, only ${drawn.length} drawn`);
    for (const [i, r] of requests.slice(0, drawn.length).entries()) {
      const fault = drawn[i]!;
      const expected = "status" in fault ? fault.status : "drop" in fault ? "dropped" : undefined;
      if (expected !== undefined && r.status !== expected) {
        out.push(`${route} #${i}: drew ${JSON.stringify(fault)}, answered ${r.status}`);
      }
    }
    return out;
  }

  /** How many of the first `count` requests of `route` were answered with a fault or dropped. */
  answeredFaults(route: WorkerRoute, count: number): number {
    return this.drawn(route).slice(0, count).filter(isAnswered).length;
  }
}

/** A fault the harness answers (or drops) instead of handling the request. */
function isAnswered(fault: Fault): boolean {
  return "status" in fault || "drop" in fault;
}

/** One draw: a fault with probability `rate`, else a pass-through. */
function draw(random: () => number, rate: number): Fault {
  if (random() >= rate) return { delayMs: 0 };
  switch (Math.floor(random() * 5)) {
    case 0:
      return { status: 429, retryAfterSec: 0 };
    case 1:
      return { status: 500 };
    case 2:
      return { status: 503 };
    case 3:
      return { drop: true };
    default:
      return { delayMs: 20 + Math.floor(random() * 180) };
  }
}
