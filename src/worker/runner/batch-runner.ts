import type { Logger } from "pino";
import type { ExecuteOutcome } from "../../handler/execute.js";
import type { ParsedInput } from "../../handler/parse-input.js";
import type { DeliveredJob } from "../../protocol/index.js";
import type { BatchTraceLink } from "../../telemetry/link.js";

/**
 * Where a batch runs, once it is launched: on the main thread (InProcessRunner.runBatch, runner.ts)
 * or in an isolation thread (ThreadRunner.runBatch, thread-runner.ts). The batch scheduler
 * (batch-scheduler.ts) fills the batches and keeps each job's fate; a runner only runs them.
 */

/** One job of a launched batch. */
export interface BatchRunMember {
  readonly job: DeliveredJob;
  /** Its validated input (a thread validates again from `job.input`: a parsed value may not clone). */
  readonly parsed: ParsedInput;
  /** The job's time limit; its deadline is the batch's start plus this. */
  readonly timeoutMs: number;
  readonly log: Logger;
  /** Where this job's progress goes, as JSON text. */
  progress(json: string): void;
}

/** A batch to run. */
export interface BatchRunRequest {
  readonly batchId: string;
  readonly members: readonly BatchRunMember[];
  /** The batch's logger (`batchId` bound). */
  readonly log: Logger;
  /** Telemetry's spans for the batch (src/telemetry), when it is on: a thread runs the batch under them. */
  readonly trace?: BatchTraceLink;
}

/** A running batch, made by the runner that runs it. */
export interface BatchRun {
  /** Resolves with the epoch ms at which the batch handler started. */
  readonly started: Promise<number>;
  /** One outcome per member, in order; `"killed"` after a hard stop. Never rejects. */
  readonly outcomes: Promise<readonly ExecuteOutcome[] | "killed">;
  /** Fires member `index`'s own signal; does nothing once the outcomes exist. */
  abortJob(index: number, reason: Error): void;
  /** Fires the batch's signal (no job of it is still wanted); does nothing once the outcomes exist. */
  abortBatch(reason: Error): void;
  /** Ends the batch by force; false when this runner cannot (in-process). */
  hardStop(): Promise<boolean>;
}
