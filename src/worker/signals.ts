import type { Logger } from "pino";

/**
 * SIGTERM and SIGINT for a worker that owns its process (`handleSignals`): the first signal starts
 * a graceful shutdown (stop taking, let running jobs finish up to the grace, flush, exit); a second
 * one exits at once with code 1, for an operator who will not wait.
 */

/** What the worker does on the first signal. */
export interface SignalActions {
  readonly log: Logger;
  /** Starts the graceful shutdown; resolves with the exit code once it is done. */
  readonly shutdown: (signal: NodeJS.Signals) => Promise<number>;
}

/** Installs the handlers; returns the function that removes them (call it once the worker has stopped). */
export function installSignalHandlers({ log, shutdown }: SignalActions): () => void {
  let received = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    received += 1;
    if (received > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(1);
    }
    log.info({ signal }, "shutting down: finishing running jobs");
    void shutdown(signal).then((exitCode) => process.exit(exitCode));
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return () => {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  };
}
