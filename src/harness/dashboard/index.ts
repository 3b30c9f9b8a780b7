export { DASHBOARD_PATH, Dashboard, type DashboardSource } from "./dashboard.js";
export type { EndCounts, EndpointView, JobDetail, JobRow, WorkerView } from "./views.js";
