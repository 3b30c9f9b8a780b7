import type { Logger } from "pino";

/**
 * SIGTERM and SIGINT for a worker that owns its process (`handleSignals`): the first signal starts
 * a graceful shutdown (stop taking, let running jobs finish up to the grace, flush, exit); a second
 * one exits at once with code 1, for an operator who will not wait.
 */

/** What the worker does on each signal (the worker's lifecycle decides; this module only listens). */
export interface SignalActions {
  /** The first SIGTERM/SIGINT: the graceful shutdown, then the process's exit. */
  first(): void;
  /** A second one: exit at once with code 1. */
  second(): void;
}

/** Installs the handlers. Returns the function that removes them (call it once the worker has stopped). */
export function installSignalHandlers(log: Logger, actions: SignalActions): () => void {
  let received = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    received += 1;
    if (received > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      actions.second();
      return;
    }
    log.info({ signal }, "shutting down: finishing running jobs");
    actions.first();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return () => {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  };
}

/** Where an error that escaped every owner goes (the worker's lifecycle: log, ping, exit). */
export type CrashAction = (err: unknown, origin: "uncaughtException" | "unhandledRejection") => void;

/**
 * The last line (docs/reliability.md, "No task's error reaches the process"): an uncaught
 * exception or unhandled rejection is a bug that escaped every owner of the worker's tasks
 * (task-sink.ts). Installed only where the worker owns its process (`handleSignals`). Returns the
 * function that removes the handlers.
 */
export function installCrashHandlers(crash: CrashAction): () => void {
  const onException = (err: unknown): void => crash(err, "uncaughtException");
  const onRejection = (err: unknown): void => crash(err, "unhandledRejection");
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  return () => {
    process.off("uncaughtException", onException);
    process.off("unhandledRejection", onRejection);
  };
}

/**
 * Watches the process's `exit` event for an exit runlet did not decide (a handler's
 * `process.exit()`): `onForeignExit` runs synchronously there, with the code chosen, and may set
 * `process.exitCode` to change it. `ownExit` says whether the exit is the worker's own. Returns the
 * function that removes the watch.
 */
export function installExitWatch(ownExit: () => boolean, onForeignExit: (code: number) => void): () => void {
  const onExit = (code: number): void => {
    if (!ownExit()) onForeignExit(code);
  };
  process.on("exit", onExit);
  return () => {
    process.off("exit", onExit);
  };
}
