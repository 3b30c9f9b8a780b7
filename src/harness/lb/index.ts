/** The harness's load-balancing endpoints (docs/load-balancing.md, "The harness and `runlet dev`"). */
export { LB_PREFIX, LoadBalancers } from "./lb-routes.js";
export {
  type LbRequestView,
  type LbWorkerHealth,
  type LbWorkerInfo,
  type LbWorkerView,
  LoadBalancer,
  type LoadBalancerOptions,
} from "./load-balancer.js";
