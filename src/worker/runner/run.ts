import type { Logger } from "pino";
import type { ExecuteHooks, ExecuteOutcome } from "../../handler/execute.js";
import type { ParsedInput } from "../../handler/parse-input.js";
import type { DeliveredJob } from "../../protocol/index.js";
import type { BatchTraceLink } from "../../telemetry/link.js";

/**
 * A run of N ≥ 1 jobs: the only unit a {@link Runner} (runner.ts) sees (docs/architecture.md, "A
 * run of N ≥ 1 jobs"). A plain handler's scheduler makes runs of one job; a batch handler's makes
 * a run of each batch, whose jobs share one handler call. A run has one handle: its start, one
 * outcome per job, an abort of one job or of all, a hard stop.
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
   * Ends the run by force; false when the runner cannot (see {@link Runner.canHardStop}). Once the
   * outcomes exist it does nothing (true: nothing is left to stop).
   */
  hardStop(): Promise<boolean>;
}

/**
 * Whether a run has ended: the one "do nothing once ended" guard of every runner. A late abort
 * must not fire a signal the handler left behind, and a late hard stop must not end a thread that
 * already serves another run.
 */
export class RunEnd {
  #ended = false;

  /** Ended once `outcome` settles (a run on the main thread). */
  static after(outcome: Promise<unknown>): RunEnd {
    const end = new RunEnd();
    outcome.then(
      () => end.end(),
      () => end.end(),
    );
    return end;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The run ended (its outcome exists, or its thread is gone). */
  end(): void {
    this.#ended = true;
  }

  /** `act`, made inert once the run has ended. */
  guard<A extends unknown[]>(act: (...args: A) => void): (...args: A) => void {
    return (...args) => {
      if (!this.#ended) act(...args);
    };
  }
}
