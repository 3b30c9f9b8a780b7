export { DASHBOARD_PATH, Dashboard, type DashboardSource } from "./dashboard.js";
export { describeHandler, type HandlerInfo, handlerInfoSchema, inputJsonSchema } from "./handler-info.js";
export type { EndCounts, EndpointView, JobDetail, JobRow, WorkerView } from "./views.js";
