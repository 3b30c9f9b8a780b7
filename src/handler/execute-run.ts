import type { Logger } from "pino";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobS3Options } from "../s3/types.js";
import type { HandlerDefinition } from "./define-handler.js";
import { type ExecuteHooks, type ExecuteOutcome, executeJob } from "./execute.js";
import { executeBatch } from "./execute-batch.js";
import { failedResult, type ReportIdentity } from "./outcome.js";
import type { ParsedInput } from "./parse-input.js";

/**
 * The one front of both executors: a run of N ≥ 1 jobs, as a runner hands it over (in-process, or
 * inside an isolation thread), becomes one outcome per job. A plain handler's jobs each go through
 * executeJob (execute.ts), at once; a batch handler's go through one executeBatch call
 * (execute-batch.ts). Never rejects.
 */

/** One job of a run, where it runs. */
export interface RunMember {
  readonly job: DeliveredJob;
  /** Its input as validated on admission; undefined: validated here. */
  readonly parsed?: ParsedInput | undefined;
  /** This job's own signal. */
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly log: Logger;
  /** Where this job's progress, chunks and streaming go. */
  readonly hooks: ExecuteHooks;
}

/** Everything {@link executeRun} needs. */
export interface ExecuteRunOptions {
  readonly definition: HandlerDefinition;
  /** A batch's id: one batch handler call for every member. Undefined: a plain handler's jobs. */
  readonly batchId: string | undefined;
  readonly members: readonly RunMember[];
  /** The batch's signal: fires when no job of it is still wanted (a plain run's jobs have their own). */
  readonly signal: AbortSignal;
  /** The run's logger (a batch's has `batchId` bound). */
  readonly log: Logger;
  readonly identity: ReportIdentity;
  /** Binds ctx.s3 to each plain job (its s3Config or the default store). */
  readonly s3: Omit<JobS3Options, "signal" | "log" | "jobId">;
  /** `ctx.state`: what setup returned where this run runs. */
  readonly state: unknown;
  /**
   * Runs one plain job's executor (`index`) or the batch's one call (`index` undefined) inside
   * whatever context it needs (an isolation thread's trace). Absent: as is.
   */
  readonly around?: <T>(index: number | undefined, execute: () => Promise<T>) => Promise<T>;
}

/** Runs the run; one outcome per member, in order. Never rejects. */
export async function executeRun(options: ExecuteRunOptions): Promise<readonly ExecuteOutcome[]> {
  const { definition, members, identity } = options;
  const around = options.around ?? (<T>(_index: number | undefined, execute: () => Promise<T>) => execute());
  try {
    if (options.batchId !== undefined) {
      const batchId = options.batchId;
      return await around(undefined, () =>
        executeBatch({
          definition,
          batchId,
          signal: options.signal,
          log: options.log,
          identity,
          state: options.state,
          members: members.map((member) => ({
            job: member.job,
            parsed: member.parsed,
            signal: member.signal,
            deadline: member.deadline,
            log: member.log,
            progress: (json: string) => member.hooks.progress(json),
          })),
        }),
      );
    }
    return await Promise.all(
      members.map((member, index) =>
        around(index, () =>
          executeJob({
            definition,
            job: member.job,
            signal: member.signal,
            deadline: member.deadline,
            log: member.log,
            identity,
            s3: options.s3,
            hooks: member.hooks,
            state: options.state,
          }),
        ),
      ),
    );
  } catch (err) {
    // executeJob and executeBatch never reject; this keeps the run's promise total should that ever change.
    return members.map(() => ({
      result: failedResult(err, identity, definition.refreshWorker),
      metrics: {},
    }));
  }
}
