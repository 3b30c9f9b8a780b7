import type { Logger } from "pino";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobMetrics } from "./metrics.js";

/**
 * The types of a batch handler (`defineBatchHandler`): what it receives for a batch of jobs and
 * what it returns. Apart from define-batch-handler.ts so that define-handler.ts can name
 * {@link BatchSettings} without importing it back (no import cycle, type-only ones included).
 */

/** One job of a batch, as the batch handler sees it: its own signal, deadline, log, progress and metrics. */
export interface BatchJob {
  /** The job's id. */
  readonly id: string;
  /** The job object exactly as the platform delivered it (`policy`, `s3Config`, ... pass through). */
  readonly raw: DeliveredJob;
  /**
   * Fires for this job alone: at its own deadline, on a job-stop naming it, or at shutdown
   * (`signal.reason.code` says which). Its place in the outputs is then ignored.
   */
  readonly signal: AbortSignal;
  /** When this job times out, in epoch ms (its `policy.executionTimeout`, else `executionTimeoutMs`, from the batch's start). */
  readonly deadline: number;
  /** A pino child logger bound to `requestId: <job id>`. */
  readonly log: Logger;
  /** Posts an IN_PROGRESS update for this job, delivered before its final result. Throws when `value` is not JSON. */
  progress(value: unknown): void;
  /** Named numbers and strings for this job; logged with its `Finished.` line. */
  readonly metrics: JobMetrics;
}

/** What a batch handler receives. */
export interface BatchContext<Input, State = undefined> {
  /** Each job's validated `input` (defaults applied), in the order of `jobs`. */
  readonly inputs: readonly Input[];
  /** Each job of the batch, in the order of `inputs`. */
  readonly jobs: readonly BatchJob[];
  /**
   * Fires when no job of the batch is still wanted (each was stopped, timed out or cut off by
   * shutdown); `reason` is the last one's. A batch still running a grace after it fires is
   * hard-stopped (docs/handler.md, "Batching").
   */
  readonly signal: AbortSignal;
  /** A pino child logger bound to `batchId`. */
  readonly log: Logger;
  /** What `setup` returned (the same object for every batch run in this place); `undefined` without a `setup`. */
  readonly state: State;
  /** The batch's id (also on the dashboard) and its size (`inputs.length`). */
  readonly batch: { readonly id: string; readonly size: number };
}

/**
 * One output per job, in order. A `JobError` (or any `Error`, or a returned `{ error: "..." }`)
 * in a job's place fails that job only; a throw fails every job of the batch.
 */
export type BatchOutputs<Output> = readonly (Output | Error)[];

/** A batch handler: sync or async; never a generator (streaming from a batch is not supported). */
export type BatchHandlerFunction<Input, Output, State = undefined> = (
  context: BatchContext<Input, State>,
) => BatchOutputs<Output> | Promise<BatchOutputs<Output>>;

/** How a batch fills, as given to `defineBatchHandler`. */
export interface BatchOptions {
  /** Most jobs in one call; a batch runs as soon as it holds this many. 1 to 1 024. @default 8 */
  maxSize?: number;
  /**
   * How long the first job of an empty batch waits for others, in ms: the batch runs when full or
   * when this window closes (and a batch slot is free). 0 to 60 000. @default 10
   */
  maxWaitMs?: number;
}

/** A batch handler's checked settings, on its definition (`definition.batch`). */
export interface BatchSettings {
  readonly maxSize: number;
  readonly maxWaitMs: number;
  // biome-ignore lint/suspicious/noExplicitAny: the worker calls it with validated inputs of any schema
  readonly handler: BatchHandlerFunction<any, unknown, any>;
}
