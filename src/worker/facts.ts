/**
 * What the worker's parts report to its lifecycle (lifecycle/lifecycle.ts), which alone decides
 * what follows. A leaf: the jobs, the fitness checks and the health loop import it from here, not
 * from the lifecycle above them.
 */
export interface WorkerFacts {
  /** The worker gave up posting a job's result: the exit code becomes 1. */
  lost(jobId: string): void;
  /** An in-process handler ignored its aborted signal past the grace: the worker must be replaced. */
  runaway(jobId: string): void;
  /** The worker cannot serve (docs/protocol.md, "Unfit workers"): ping unhealthy, stop, exit 1. */
  unfit(check: string, reason: string): void;
  /** A result asked the platform to replace this worker (`stopPod`): take nothing more, then stop. */
  refresh(jobId: string): void;
}
