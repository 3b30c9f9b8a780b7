import type { Logger } from "pino";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { WorkerEventHub, WorkerEvents } from "../events.js";
import {
  budgetLeftMs,
  configuredStartup,
  describeBudget,
  giveUpAfterMs,
  INIT_TIMEOUT_ENV,
  type StartupBudget,
} from "../startup-budget.js";
import type { WorkerPart } from "./part-list.js";

/**
 * The start-up budget as a part of the worker (docs/fitness.md, "The start-up budget"); the
 * budget itself, read from the environment into the config, is ../startup-budget.ts.
 */

/** What the budget part needs from the worker. */
export interface BudgetPartSource {
  readonly budget: StartupBudget;
  readonly definition: HandlerDefinition;
  readonly log: Logger;
  readonly events: WorkerEventHub;
  /** Declares the worker unfit (the lifecycle's): it stops the start, pings unhealthy and exits 1. */
  readonly unfit: (check: string, reason: string) => void;
}

/** The unhealthy ping's check name when start-up runs out of budget. */
export const STARTUP_BUDGET_CHECK = "startup";

/**
 * The budget as a worker part, first of the start-up: at start it says when the configured
 * timeouts exceed the budget, and arms one timer for what is left; a phase still running when it
 * fires (the fitness checks, the warm cache, the sidecars, setup) is cut there, and the worker is
 * unfit with a reason naming RUNPOD_INIT_TIMEOUT. Ready or stopping disarms it.
 */
export function startupBudgetPart(source: BudgetPartSource): WorkerPart {
  const { budget, log, events } = source;
  let timer: NodeJS.Timeout | undefined;
  let phase: string | undefined;
  const onPhase = (e: WorkerEvents["phase"]) => {
    phase = e.state === "started" ? e.phase : undefined;
  };
  const disarm = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    events.off("phase", onPhase);
  };
  return {
    name: "start-up budget",
    start: () => {
      const configured = configuredStartup(source.definition);
      const leftMs = budgetLeftMs(budget);
      if (configured.totalMs > giveUpAfterMs(budget)) {
        log.warn(
          { startupBudgetMs: budget.totalMs, configuredStartupMs: configured.totalMs },
          `start-up budget: the timeouts the handler sets (${configured.parts.join(" + ")} = ${configured.totalMs} ms) exceed ${describeBudget(budget)}; ` +
            `a start-up still running ${Math.round(giveUpAfterMs(budget) / 1_000)} s after the process started ends unfit. ` +
            `Raise ${INIT_TIMEOUT_ENV} on the endpoint (seconds) for a longer start, or lower the timeouts`,
        );
      }
      events.on("phase", onPhase);
      const expire = () => {
        disarm();
        const elapsed = ((Date.now() - budget.startedAt) / 1_000).toFixed(1);
        source.unfit(
          STARTUP_BUDGET_CHECK,
          `start-up did not finish within ${describeBudget(budget)}: ${phase === undefined ? "start-up" : `the ${phase} phase`} was still running ${elapsed} s after the process started, ` +
            `and the platform marks a worker unhealthy past that limit. Raise ${INIT_TIMEOUT_ENV} on the endpoint (seconds), or make start-up shorter (docs/fitness.md, "The start-up budget")`,
        );
      };
      // Real time, as the platform counts it; unref'd: the budget never keeps a process alive.
      timer = setTimeout(expire, leftMs);
      timer.unref();
      return true;
    },
    ready: disarm,
    stop: disarm,
  };
}
