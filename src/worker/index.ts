export { retryAfterMs, sleep } from "../wait.js";
export { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
export type { WorkerEvents, WorkerListener } from "./events.js";
export { loadHandler } from "./load-handler.js";
export { EMPTY_PAUSE, MAX_RETRY_AFTER_MS, pollRetryPolicy, postRetryPolicy } from "./platform/backoff.js";
export { isRunnerThread, runRunnerThread } from "./runner/thread-entry.js";
export { LOCAL_MODE_MESSAGE, type ServeOptions, serveHandler } from "./serve.js";
export { startWorker, Worker, type WorkerStopInfo } from "./worker.js";
