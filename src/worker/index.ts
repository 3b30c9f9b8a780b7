export { retryAfterMs, sleep } from "../wait.js";
export { EMPTY_PAUSE, MAX_RETRY_AFTER_MS, pollRetryPolicy, postRetryPolicy } from "./backoff.js";
export { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
export type { WorkerEvents, WorkerListener } from "./events.js";
export { loadHandler } from "./load-handler.js";
export { LOCAL_MODE_MESSAGE, type ServeOptions, serveHandler } from "./serve.js";
export { isRunnerThread, runRunnerThread } from "./thread-entry.js";
export { startWorker, Worker, type WorkerStopInfo } from "./worker.js";
