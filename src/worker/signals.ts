import type { Logger } from "pino";
import type { WorkerStopper } from "./worker-stopper.js";

/**
 * SIGTERM and SIGINT for a worker that owns its process (`handleSignals`): the first signal starts
 * a graceful shutdown (stop taking, let running jobs finish up to the grace, flush, exit); a second
 * one exits at once with code 1, for an operator who will not wait.
 */

/**
 * Installs the handlers: the first signal goes to `stopper.signal()` (the graceful shutdown, which
 * resolves with the exit code). Returns the function that removes them (call it once the worker
 * has stopped).
 */
export function installSignalHandlers(log: Logger, stopper: WorkerStopper): () => void {
  let received = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    received += 1;
    if (received > 1) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(1);
    }
    log.info({ signal }, "shutting down: finishing running jobs");
    void stopper.signal().then((exitCode) => process.exit(exitCode));
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  return () => {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  };
}
