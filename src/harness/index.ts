export { type Clock, type ClockTimer, ManualClock, realClock } from "./clock.js";
export { describeHandler, type HandlerInfo, handlerInfoSchema } from "./dashboard/index.js";
export type { WorkerView } from "./dashboard/views.js";
export { type ProcessSpawnerOptions, processSpawner } from "./fleet/process-spawner.js";
export type { WorkerEnvOptions } from "./fleet/worker-env.js";
export type { WorkerCounts } from "./fleet/worker-registry.js";
export {
  type StartupReport,
  type StartupUpdate,
  startupUpdateOfLine,
  startupUpdateOfRecord,
  type WorkerStartup,
} from "./fleet/worker-startup.js";
export { Harness, type HarnessMemory, startHarness } from "./harness.js";
export { type AuthResult, KeyRing, type ScopedKey } from "./http/auth.js";
export type { RateLimitOptions } from "./http/rate-limits.js";
export type { JobKind, JobSnapshot, NewJob } from "./jobs/job-entry.js";
export type { JobEvent, JobEventListener } from "./jobs/job-events.js";
export type { TimelineSpan } from "./jobs/job-timeline.js";
export type { WebhookAttempt, WebhookOptions } from "./jobs/webhooks.js";
export {
  type LbRequestView,
  type LbWorkerHealth,
  type LbWorkerInfo,
  type LbWorkerView,
  LoadBalancer,
  type LoadBalancerOptions,
} from "./lb/index.js";
export type {
  DashboardOptions,
  EndpointOptions,
  EndpointUpdate,
  ExtraRoutes,
  HarnessLimits,
  HarnessOptions,
  LbEndpointUpdate,
  SpawnedWorker,
  WorkerSpawner,
} from "./options.js";
export {
  type Fault,
  type RecordedRequest,
  type RequestFilter,
  WORKER_ROUTES,
  type WorkerRoute,
} from "./routes/request-log.js";
