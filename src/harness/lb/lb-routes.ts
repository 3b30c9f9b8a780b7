import type { IncomingMessage, ServerResponse } from "node:http";
import type { KeyRing } from "../http/auth.js";
import { sendError } from "../http/http-util.js";
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

/** The harness's load-balancing endpoints, by id. */
export class LoadBalancers {
  readonly #balancers = new Map<string, LoadBalancer>();
  readonly #keys: KeyRing;

  constructor(options: readonly LoadBalancerOptions[], keys: KeyRing) {
    this.#keys = keys;
    for (const o of options) this.#balancers.set(o.id, new LoadBalancer(o));
  }

  /** The endpoint `id`, or undefined. */
  get(id: string): LoadBalancer | undefined {
    return this.#balancers.get(id);
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

  close(): void {
    for (const balancer of this.#balancers.values()) balancer.close();
  }
}
