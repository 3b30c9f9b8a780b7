import type { Logger } from "pino";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { HANDLER_DEFAULTS } from "../../handler/define-handler.js";
import { settle } from "../../task-sink.js";
import type { WorkerEventHub } from "../events.js";
import { FrontThread } from "../lb/front-thread.js";
import type { JobRunDeps } from "../lb/job-run.js";
import { LB_MAX_REQUEST_MS, type LbSettings } from "../lb/lb-config.js";
import { RequestServer } from "../lb/request-server.js";
import type { WorkerLifecycle } from "./lifecycle.js";
import type { WorkerPart } from "./part-list.js";

/**
 * The load-balancing mode's two parts of the worker's part list (docs/load-balancing.md): the
 * port (the front thread, first of the worker's own parts, so health answers 204 through every
 * start-up phase after it) and the request server (last, so requests reach the handler only once
 * setup is done). Everything between them — fitness, the warm cache, sidecars, the runner — is
 * the queue mode's own parts, unchanged.
 */

/** What the two parts are made from. */
export interface LbPartsSource {
  readonly settings: LbSettings;
  readonly definition: HandlerDefinition;
  readonly log: Logger;
  readonly lifecycle: WorkerLifecycle;
  readonly events: WorkerEventHub;
  readonly scheduler: JobRunDeps["scheduler"];
  /** The worker's clock's now (the parts' stop deadline is on it). */
  readonly now: () => number;
}

/** The port part and the request-server part, to go first and last of the worker's own parts. */
export function lbParts(source: LbPartsSource): { readonly port: WorkerPart; readonly server: WorkerPart } {
  const { settings, definition, log, lifecycle } = source;
  let front: FrontThread | undefined;
  const server = new RequestServer({
    definition,
    log,
    events: source.events,
    scheduler: source.scheduler,
    reports: {
      unfit: (check, reason) => lifecycle.unfit(check, reason),
      refresh: (requestId) => lifecycle.refresh(requestId),
      runaway: (requestId) => lifecycle.runaway(requestId),
    },
  });
  const port: WorkerPart = {
    name: "load-balancer port",
    start: async () => {
      const thread = new FrontThread(settings);
      front = thread;
      try {
        const bound = await thread.listening;
        log.info(
          { port: bound.port, healthPort: bound.healthPort, healthPath: settings.healthPath },
          `load-balancing mode: listening on port ${bound.port}, health on ${bound.healthPort}${settings.healthPath}`,
        );
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        log.error({ err }, `load-balancing mode: ${reason}`);
        lifecycle.unfit("port", reason);
        return false;
      }
      settle(
        thread.died.then((reason) => lifecycle.unfit("front-thread", reason)),
        (err) => source.log.error({ err }, "watching the load-balancer's front thread failed"),
      );
      // From the moment the worker stops taking (unfit, SIGTERM, close), health answers 503.
      lifecycle.taking.addEventListener(
        "abort",
        () => thread.state(lifecycle.info.reason === "unhealthy" ? "unhealthy" : "stopping"),
        { once: true },
      );
      if (lifecycle.taking.aborted) thread.state("stopping");
      return true;
    },
    ready: () => front?.state("ready"),
    stop: async () => {
      await front?.close();
    },
  };
  const requests: WorkerPart = {
    name: "request server",
    start: async () => {
      if (front === undefined) return false;
      server.attach(front.requests);
      front.serving();
      const asked = definition.executionTimeoutMs;
      if (asked > LB_MAX_REQUEST_MS) {
        const line = `a request's deadline is ${LB_MAX_REQUEST_MS} ms, the platform's 5.5 min limit on load-balancing endpoints, not the handler's executionTimeoutMs of ${asked} ms`;
        if (asked === HANDLER_DEFAULTS.executionTimeoutMs) log.info(line);
        else log.warn(line);
      }
      const concurrency = typeof definition.concurrency === "number" ? definition.concurrency : 1;
      log.info({ routes: server.routes, concurrency }, "load-balancing mode: serving routes");
      return true;
    },
    stop: (deadline) => server.drain(Math.max(0, deadline - source.now())),
  };
  return { port, server: requests };
}
