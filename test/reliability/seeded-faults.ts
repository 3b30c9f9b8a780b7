import type { Fault, Harness, WorkerRoute } from "../../src/harness/index.js";
import { seededRandom } from "./helpers.js";

/**
 * A seeded random fault injector over the harness's count-based `injectFault`: each request of a
 * watched route draws from a seeded sequence; a draw under `rate` is a fault (429, 500, 503, a
 * dropped connection or a delay), anything else is `{ delayMs: 0 }`, which the harness handles
 * normally. The harness applies one queued entry per request, so the queue is kept topped up
 * ahead of the requests it has seen (re-armed every `intervalMs`).
 */
export class SeededFaults {
  readonly #harness: Harness;
  readonly #routes: readonly WorkerRoute[];
  readonly #rate: number;
  readonly #random: () => number;
  readonly #queued = new Map<WorkerRoute, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(harness: Harness, routes: readonly WorkerRoute[], options: { rate: number; seed: number }) {
    this.#harness = harness;
    this.#routes = routes;
    this.#rate = options.rate;
    this.#random = seededRandom(options.seed);
  }

  /** One draw: a fault with probability `rate`, else a pass-through. */
  #draw(): Fault {
    if (this.#random() >= this.#rate) return { delayMs: 0 };
    const pick = Math.floor(this.#random() * 5);
    switch (pick) {
      case 0:
        return { status: 429, retryAfterSec: 0 };
      case 1:
        return { status: 500 };
      case 2:
        return { status: 503 };
      case 3:
        return { drop: true };
      default:
        return { delayMs: 20 + Math.floor(this.#random() * 180) };
    }
  }

  /** Keeps at least `ahead` draws queued beyond the requests each route has had. */
  #topUp(ahead = 400): void {
    for (const route of this.#routes) {
      const seen = this.#harness.requests({ route }).length;
      let queued = this.#queued.get(route) ?? 0;
      while (queued - seen < ahead) {
        this.#harness.injectFault(route, this.#draw());
        queued++;
      }
      this.#queued.set(route, queued);
    }
  }

  /** Arms the faults and keeps re-arming them until {@link stop}. */
  start(intervalMs = 50): void {
    this.#topUp();
    this.#timer = setInterval(() => this.#topUp(), intervalMs);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
