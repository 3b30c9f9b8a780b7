/** The harness's load-balancing endpoints (docs/load-balancing.md, "The harness and `runlet dev`"). */
export { LbFleet, type LbFleetOptions } from "./lb-fleet.js";
export { LB_PREFIX, type LbEndpointOptions, LoadBalancers } from "./lb-routes.js";
export {
  type LbRequestView,
  type LbWorkerHealth,
  type LbWorkerInfo,
  type LbWorkerView,
  LoadBalancer,
  type LoadBalancerOptions,
} from "./load-balancer.js";
