/**
 * The worker's event contract, as the worker's own modules import it. It lives in a leaf file
 * outside src/worker (src/worker-events.ts), so that telemetry, which listens to it, imports
 * nothing of the worker.
 */
export {
  type BatchWrapper,
  type HandlerWrapper,
  type StartupPhaseName,
  WorkerEventHub,
  type WorkerEvents,
  type WorkerListener,
} from "../worker-events.js";
