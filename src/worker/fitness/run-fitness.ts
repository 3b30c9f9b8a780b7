import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { Unfitness } from "../../handler/unfit.js";
import type { WorkerFacts } from "../facts.js";
import { type FitnessCheck, FitnessFailure } from "./check.js";
import type { FitnessConfig } from "./fitness-config.js";
import { runHealthCheck } from "./health.js";

/**
 * Step 1 of the worker's start-up (docs/fitness.md): the built-in checks in a fixed order, then the
 * handler's own `healthCheck`, each logging one line; the first failure is the worker's unfitness
 * (docs/protocol.md, "Unfit workers": one unhealthy ping with the check's name, exit 1).
 */

/** What the fitness step works with. */
export interface FitnessDeps {
  readonly definition: HandlerDefinition;
  readonly config: FitnessConfig;
  /** Run the built-in checks (the worker's `fitnessChecks`); the handler's `healthCheck` runs either way. */
  readonly builtIn: boolean;
  readonly log: Logger;
  /** Aborts when the worker closes: a check cut short says nothing about fitness. */
  readonly closing: AbortSignal;
  /** The worker's clock: the handler's health check times out on it. */
  readonly clock?: Clock;
}

/** Runs the checks in order; resolves with the first unfitness, or undefined when all passed (or the worker closed). Never rejects. */
export async function runFitnessChecks(
  deps: FitnessDeps,
  given?: readonly FitnessCheck[],
): Promise<Unfitness | undefined> {
  const { log, closing, definition } = deps;
  // The built-in checks' module (node:child_process, node:net) loads when they run, not with the
  // worker: a start that skips them all (RUNPOD_SKIP_AUTO_SYSTEM_CHECKS and RUNPOD_SKIP_GPU_CHECK)
  // never pays for it (docs/benchmarks.md, "Cold start").
  let checks = given ?? [];
  if (given === undefined && deps.builtIn && !(deps.config.skipSystemChecks && deps.config.skipGpuCheck)) {
    try {
      checks = (await import("./built-in-checks.js")).builtInChecks(deps.config, closing);
    } catch (err) {
      return { check: "fitness", reason: `the built-in checks could not load: ${String(err)}` };
    }
  }
  const started = performance.now();
  for (const check of checks) {
    if (closing.aborted) return undefined;
    const at = performance.now();
    try {
      const outcome = await check.run(closing);
      const ms = Math.round(performance.now() - at);
      const fields = { fitness: check.name, status: outcome.status, ms, ...outcome.fields };
      const line = `fitness ${check.name}: ${outcome.status === "skipped" ? "skipped, " : ""}${outcome.figure}`;
      // A CPU-only machine skips the GPU checks silently (debug), as the Python SDK does.
      if (outcome.status === "skipped" && outcome.figure.startsWith("no GPU")) log.debug(fields, line);
      else log.info(fields, line);
    } catch (err) {
      if (closing.aborted) return undefined;
      const reason =
        err instanceof FitnessFailure
          ? err.message
          : `the check threw: ${err instanceof Error ? err.message : String(err)}`;
      log.error(
        { fitness: check.name, status: "failed", ms: Math.round(performance.now() - at) },
        `fitness ${check.name} failed: ${reason}`,
      );
      return { check: check.name, reason };
    }
  }
  if (definition.healthCheck !== undefined) {
    const at = performance.now();
    const unfit = await runHealthCheck(definition, log, closing, deps.clock);
    if (closing.aborted) return undefined;
    const ms = Math.round(performance.now() - at);
    if (unfit !== undefined) {
      log.error(
        { fitness: unfit.check, status: "failed", ms },
        `fitness ${unfit.check} failed: ${unfit.reason}`,
      );
      return unfit;
    }
    log.info({ fitness: "healthCheck", status: "passed", ms }, `fitness healthCheck: passed in ${ms} ms`);
  }
  if (checks.length > 0) {
    const ms = Math.round(performance.now() - started);
    log.info({ ms }, `fitness checks passed in ${ms} ms`);
  }
  return undefined;
}

/**
 * The worker's fitness step: runs every check and, on a failure, reports the worker unfit to
 * its lifecycle (unhealthy ping with `check=<name>`, stop, exit code 1). False when it failed.
 */
export async function checkFitness(deps: FitnessDeps, facts: Pick<WorkerFacts, "unfit">): Promise<boolean> {
  const unfit = await runFitnessChecks(deps);
  if (unfit === undefined) return true;
  facts.unfit(unfit.check, unfit.reason);
  return false;
}
