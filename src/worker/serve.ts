import { isRunletError } from "../errors.js";
import type { HandlerDefinition } from "../handler/define-handler.js";
import { chooseServeMode } from "./lb/lb-config.js";
import { endProcessSoon } from "./lifecycle/lifecycle.js";
import { isRunnerThread, runRunnerThread } from "./runner/thread-entry.js";
import type { ServeOptions } from "./serve-options.js";
import { startWorker, type WorkerStopInfo } from "./worker.js";

export type { ServeOptions };

/** After a non-zero stop, how long the process may take to end on its own before it is ended. */
const FORCED_EXIT_DELAY_MS = 1_000;

/** The message `runlet start` and a bundle print when the platform's environment is missing. */
export const LOCAL_MODE_MESSAGE =
  "runlet start: RUNPOD_WEBHOOK_GET_JOB is not set, so there is no platform to take jobs from, and neither " +
  "PORT nor RUNLET_MODE asks for a load-balancing server; this serves the platform inside its container. " +
  "Locally, run `runlet dev <handler>` " +
  "(a local platform plus workers) or `runlet test <handler> --input '{...}'` (one job) " +
  "(RUNLET_CLI_NO_PLATFORM)\n";

/**
 * What a process entry point does with a handler: inside an isolation thread, serve jobs for the
 * main thread; otherwise run the worker loop with signal handling and exit when it stops.
 * The mode is `options.mode`, else the env's (docs/load-balancing.md, "Choosing the mode"): the
 * queue's worker loop, a load-balancing server on PORT, or a harness on a Pod. Returns an exit
 * code without starting anything in local mode (none of them asked for) or for a bad mode: 2.
 *
 * @example
 * // the entry of a single-file bundle (see docs/worker.md, "Thread entry")
 * import definition from "./handler.ts";
 * import { serveHandler } from "runlet";
 * process.exitCode = await serveHandler(definition, { env: process.env, threadEntry: import.meta.url });
 */
export async function serveHandler(definition: HandlerDefinition, options: ServeOptions): Promise<number> {
  if (isRunnerThread()) {
    runRunnerThread(definition);
    return 0;
  }
  let mode: ReturnType<typeof chooseServeMode>;
  try {
    mode = chooseServeMode(options.env, options.mode);
  } catch (err) {
    if (!isRunletError(err)) throw err;
    process.stderr.write(`runlet start: ${err.message} (${err.code})\n`);
    return 2;
  }
  if (mode === undefined) {
    process.stderr.write(LOCAL_MODE_MESSAGE);
    return 2;
  }
  if (mode === "pod") {
    const { servePod } = await import("../pod/serve-pod.js");
    return servePod(definition, options);
  }
  const worker = await startWorker(definition, {
    mode,
    env: options.env,
    handleSignals: true,
    exitOnHardStop: true,
    // In a container (and under `runlet dev`): the built-in fitness checks run (docs/fitness.md).
    fitnessChecks: true,
    // The process environment, which the handler's sidecars inherit (docs/models.md, "Sidecars").
    sidecarBaseEnv: options.env,
    // The start-up budget (RUNPOD_INIT_TIMEOUT) counts from the process's start, as the platform's does.
    startedAt: performance.timeOrigin,
    ...(options.handlerModule === undefined ? {} : { handlerModule: options.handlerModule }),
    ...(options.threadEntry === undefined ? {} : { threadEntry: options.threadEntry }),
    ...(options.heartbeatEntry === undefined ? {} : { heartbeatEntry: options.heartbeatEntry }),
    ...(options.shutdownGraceMs === undefined ? {} : { shutdownGraceMs: options.shutdownGraceMs }),
  });
  const info: WorkerStopInfo = await worker.stopped;
  if (info.exitCode !== 0 || info.reason === "refresh") {
    // An unfit, runaway or refreshed worker must end even if a handler left a timer or socket open: the
    // caller gets a moment to set the exit code and flush, then the process exits regardless.
    endProcessSoon(info.exitCode, FORCED_EXIT_DELAY_MS);
  }
  return info.exitCode;
}
