import type { Logger } from "pino";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobS3Options } from "../s3/types.js";
import type { BatchTraceLink } from "../telemetry/link.js";
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

/**
 * A run of N ≥ 1 jobs, as a runner (src/worker/runner) is handed it: a plain handler's run of one
 * job, or a batch. One handle each ({@link RunHandle}).
 */

/** One job of a run. */
export interface RunJob {
  readonly job: DeliveredJob;
  /** The job's time limit; its deadline is the run's start plus this. */
  readonly timeoutMs: number;
  readonly log: Logger;
  /**
   * Its input as validated when it was admitted (a batch handler's job, in-process); undefined:
   * validated where it runs (a thread validates again from `job.input`: a parsed value may not clone).
   */
  readonly parsed?: ParsedInput | undefined;
  /** Where this job's progress, chunks and streaming go (a batch handler's job only reports progress). */
  readonly hooks: ExecuteHooks;
  /**
   * The job is launched: the runner calls this synchronously just before the job's handler can
   * run, with the epoch ms it starts at. ActiveJob arms its watchdog here, so a job waiting for its
   * seat is never taken for one holding the main thread.
   */
  readonly onLaunch: (at: number) => void;
}

/** A run to start. */
export interface Run {
  /** Set for a batch handler's run (its one call gets every job); undefined: a plain handler's jobs, one call each. */
  readonly batchId: string | undefined;
  readonly jobs: readonly RunJob[];
  /** The run's logger (a batch's has `batchId` bound). */
  readonly log: Logger;
  /** Telemetry's spans for a batch (src/telemetry), when it is on: a thread runs the batch under them. */
  readonly trace?: BatchTraceLink | undefined;
}

/** A started run, made by the runner that runs it. */
export interface RunHandle {
  /** Resolves with the epoch ms at which the run's handler started (each job's deadline counts from it). */
  readonly started: Promise<number>;
  /** One outcome per job, in order; `"killed"` after a hard stop. Never rejects. */
  readonly outcomes: Promise<readonly ExecuteOutcome[] | "killed">;
  /**
   * Fires job `index`'s own signal, or without `index` the run's (a batch's signal; every job's
   * of a plain run). Does nothing once the outcomes exist: a late abort never reaches the next run.
   */
  abort(reason: Error, index?: number): void;
  /**
   * Ends the run by force; false when the runner cannot (see the runner's `canHardStop`). Once the
   * outcomes exist it does nothing (true: nothing is left to stop).
   */
  hardStop(): Promise<boolean>;
}

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
  /** The batch's signal: fires when no job of it is still wanted (a plain run's jobs have their own; any signal will do there). */
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
export function executeRun(options: ExecuteRunOptions): Promise<readonly ExecuteOutcome[]> {
  const { members } = options;
  const only = members.length === 1 ? members[0] : undefined;
  if (only === undefined || options.batchId !== undefined || options.around !== undefined) {
    return executeMany(options);
  }
  // A plain run of one (every plain job in production): executeJob itself, which never rejects.
  return executeJob({
    definition: options.definition,
    job: only.job,
    signal: only.signal,
    deadline: only.deadline,
    log: only.log,
    identity: options.identity,
    s3: options.s3,
    hooks: only.hooks,
    state: options.state,
  }).then(inArray);
}

const inArray = (outcome: ExecuteOutcome): readonly ExecuteOutcome[] => [outcome];

/** A batch's one call, or a plain run of several jobs (each its own call, at once). */
async function executeMany(options: ExecuteRunOptions): Promise<readonly ExecuteOutcome[]> {
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
