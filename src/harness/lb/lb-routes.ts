import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock } from "../clock.js";
import type { KeyRing } from "../http/auth.js";
import { sendError } from "../http/http-util.js";
import type { EndpointWorkerView } from "../management-api/route-context.js";
import { LbFleet, type LbFleetOptions } from "./lb-fleet.js";
import {
  type LbRequestView,
  type LbWorkerView,
  LoadBalancer,
  type LoadBalancerOptions,
} from "./load-balancer.js";

/**
 * The harness's load-balancing endpoints on its API listener: `/lb/<endpoint id>/<any path>`
 * reaches that endpoint's workers (docs/load-balancing.md, "The harness and `runlet dev`"), with
 * the harness's API key, as `https://<endpoint id>.api.runpod.ai/<any path>` on the platform.
 */

/** The path prefix of the load-balancing endpoints. */
export const LB_PREFIX = "/lb/";

/** A load-balancing endpoint added while the harness runs: its balancer, and the workers started for it. */
export interface LbEndpointOptions extends Omit<LoadBalancerOptions, "onDemand"> {
  /** Starts its workers (see {@link LbFleet}); without it, workers are added by hand (`addWorker`). */
  readonly fleet?: LbFleetOptions;
}

/** The harness's load-balancing endpoints, by id. */
export class LoadBalancers {
  readonly #balancers = new Map<string, LoadBalancer>();
  readonly #fleets = new Map<string, LbFleet>();
  readonly #keys: KeyRing;
  /** The fleets' clock (their idle timeouts). */
  readonly #clock: Clock | undefined;

  constructor(options: readonly LoadBalancerOptions[], keys: KeyRing, clock?: Clock) {
    this.#keys = keys;
    this.#clock = clock;
    for (const o of options) this.#balancers.set(o.id, new LoadBalancer(o));
  }

  /** The endpoint `id`, or undefined. */
  get(id: string): LoadBalancer | undefined {
    return this.#balancers.get(id);
  }

  /** Adds an endpoint while running, and starts its fleet (a no-op when the id exists). */
  add(options: LbEndpointOptions): void {
    if (this.#balancers.has(options.id)) return;
    const { fleet: fleetOptions, ...balancerOptions } = options;
    let fleet: LbFleet | undefined;
    const balancer = new LoadBalancer({
      ...balancerOptions,
      ...(fleetOptions === undefined
        ? {}
        : { onDemand: () => fleet?.demand(), onIdle: (workerId) => fleet?.idle(workerId) }),
    });
    this.#balancers.set(options.id, balancer);
    if (fleetOptions !== undefined) {
      fleet = new LbFleet(balancer, {
        ...(this.#clock === undefined ? {} : { clock: this.#clock }),
        ...fleetOptions,
      });
      this.#fleets.set(options.id, fleet);
    }
  }

  /**
   * Removes an endpoint: its route answers 404 at once, requests waiting on it answer "no workers
   * available", and the workers its fleet started stop. False when there was none.
   */
  async remove(id: string): Promise<boolean> {
    const balancer = this.#balancers.get(id);
    if (balancer === undefined) return false;
    this.#balancers.delete(id);
    const fleet = this.#fleets.get(id);
    this.#fleets.delete(id);
    balancer.close();
    await fleet?.close();
    return true;
  }

  /** The endpoint's fleet (the workers the harness starts for it), or undefined when it has none. */
  fleet(id: string): LbFleet | undefined {
    return this.#fleets.get(id);
  }

  /** Replaces a worker its fleet started (a release rolling out); false when it has no fleet. */
  replaceWorker(id: string, workerId: string): boolean {
    const fleet = this.#fleets.get(id);
    fleet?.replace(workerId);
    return fleet !== undefined;
  }

  /** The workers its fleet started, as the management copy reports them (none for an endpoint without a fleet). */
  workersOf(id: string): EndpointWorkerView[] {
    return this.#fleets.get(id)?.views() ?? [];
  }

  /** Answers a request under `/lb/`; false for any other path. */
  readonly serve = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> => {
    if (!url.pathname.startsWith(LB_PREFIX)) return false;
    const rest = url.pathname.slice(LB_PREFIX.length);
    const slash = rest.indexOf("/");
    const id = decodeURIComponent(slash === -1 ? rest : rest.slice(0, slash));
    const balancer = this.#balancers.get(id);
    if (balancer === undefined) {
      sendError(res, 404, `no load-balancing endpoint ${JSON.stringify(id)}`);
      return true;
    }
    const auth = this.#keys.client(req.headers.authorization, id);
    if (auth !== "ok") {
      sendError(
        res,
        auth === "forbidden" ? 403 : 401,
        auth === "forbidden" ? "this key does not open this endpoint" : "missing or wrong API key",
      );
      return true;
    }
    const path = (slash === -1 ? "/" : rest.slice(slash)) + url.search;
    await balancer.serve(req, res, path);
    return true;
  };

  /** Each endpoint's workers and latest requests (the newest 50), for the dashboard. */
  views(): { id: string; workers: LbWorkerView[]; requests: LbRequestView[] }[] {
    return [...this.#balancers.values()].map((b) => ({
      id: b.id,
      workers: b.workers(),
      requests: b.requests().slice(-50).reverse(),
    }));
  }

  /** Closes every endpoint and stops the workers their fleets started. */
  async close(): Promise<void> {
    for (const balancer of this.#balancers.values()) balancer.close();
    await Promise.all([...this.#fleets.values()].map((f) => f.close()));
  }
}
