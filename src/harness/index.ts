export { type AuthResult, KeyRing, type ScopedKey } from "./auth.js";
export { type Clock, type ClockTimer, ManualClock, realClock } from "./clock.js";
export { describeHandler, type HandlerInfo, handlerInfoSchema } from "./dashboard/index.js";
export type { WorkerView } from "./dashboard/views.js";
export { Harness, type HarnessMemory, startHarness } from "./harness.js";
export type { JobKind, JobSnapshot, NewJob } from "./job-entry.js";
export type { JobEvent, JobEventListener } from "./job-events.js";
export type { TimelineSpan } from "./job-timeline.js";
export type {
  DashboardOptions,
  EndpointOptions,
  ExtraRoutes,
  HarnessLimits,
  HarnessOptions,
  SpawnedWorker,
  WorkerSpawner,
} from "./options.js";
export { type ProcessSpawnerOptions, processSpawner } from "./process-spawner.js";
export type { RateLimitOptions } from "./rate-limits.js";
export {
  type Fault,
  type RecordedRequest,
  type RequestFilter,
  WORKER_ROUTES,
  type WorkerRoute,
} from "./request-log.js";
export type { WebhookAttempt, WebhookOptions } from "./webhooks.js";
export type { WorkerEnvOptions } from "./worker-env.js";
export type { WorkerCounts } from "./worker-registry.js";
export {
  type StartupReport,
  type StartupUpdate,
  startupUpdateOfLine,
  startupUpdateOfRecord,
  type WorkerStartup,
} from "./worker-startup.js";
