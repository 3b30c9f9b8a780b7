/** `runlet/client`: a typed client of the job API (docs/client.md). */
export type {
  Health,
  JobRecord,
  JobRef,
  JobStatus,
  RunRequest,
  StreamChunk,
} from "../protocol/index.js";
export { TERMINAL_STATUSES } from "../protocol/index.js";
export { createReassembler, type Reassembler, reassemble } from "../stream/index.js";
export { type Client, createClient } from "./client.js";
export type {
  EndpointClientFor,
  EndpointClientOf,
  HandlerInput,
  HandlerOutput,
  HandlerStreamItem,
} from "./infer.js";
export {
  createLoadBalancerClient,
  type LbAffinity,
  type LbCallOptions,
  type LbRunResult,
  type LoadBalancerCalls,
  type LoadBalancerClient,
  type LoadBalancerClientOptions,
  type LoadBalancerSession,
} from "./lb-client.js";
export type { ClientOptions } from "./options.js";
export type {
  CallOptions,
  EndpointClient,
  PurgeResult,
  RunBody,
  RunsyncOptions,
  StatusOptions,
  StreamOptions,
  TypedJobRecord,
  WaitOptions,
} from "./types.js";
