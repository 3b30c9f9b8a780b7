import type { Logger } from "pino";
import type { HandlerDefinition } from "../handler/define-handler.js";
import { type ExecuteHooks, type ExecuteOutcome, executeJob } from "../handler/execute.js";
import type { ReportIdentity } from "../handler/outcome.js";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobS3Options } from "../s3/types.js";

/** Where jobs run: on the main thread, or in killable worker threads (see thread-executor.ts). */

/** One job handed to an executor. */
export interface ExecRequest {
  readonly job: DeliveredJob;
  /** The job's time limit; its clock starts when the handler starts (after a thread has loaded). */
  readonly timeoutMs: number;
  readonly log: Logger;
}

/** A running job, made by the executor that runs it (its abort and hard stop differ between the two). */
export interface ExecHandle {
  /** Resolves with the epoch ms at which the handler started (its deadline is that plus the timeout). */
  readonly started: Promise<number>;
  /** Resolves with what the handler produced; `"killed"` after a hard stop, never rejects. */
  readonly outcome: Promise<ExecuteOutcome | "killed">;
  /** Fires the job's signal with `reason`; does nothing once `outcome` has settled. */
  abort(reason: Error): void;
  /**
   * Ends the handler by force; false when this executor cannot (in-process). Once `outcome` has
   * settled it does nothing (true: nothing is left to stop).
   */
  hardStop(): Promise<boolean>;
}

/**
 * Runs jobs. An interface because the handler's `isolation` picks one of two implementations once,
 * at start (worker-parts.ts, createExecutor): {@link InProcessExecutor} or ThreadExecutor
 * (thread-executor.ts); ActiveJob uses whichever it is given.
 */
export interface Executor {
  run(request: ExecRequest, hooks: ExecuteHooks): ExecHandle;
  close(): Promise<void>;
  /**
   * How many more jobs the worker may take now, when the executor decides it (a batch handler's
   * BatchExecutor, batch-executor.ts); `concurrency` is the value the job board holds. Absent: one
   * job a slot.
   */
  room?(concurrency: number): number;
  /** Called when {@link room} may have grown without a job ending (a batch started). */
  onRoomChange?(listener: () => void): void;
}

/** How ctx.s3 behaves, resolved once from the worker's options and the handler's. */
export interface S3Settings {
  readonly allowPrivateAddresses: boolean;
  readonly presignExpiresSec: number;
  /** Undefined: os.tmpdir(). */
  readonly tmpRoot: string | undefined;
}

/** Shared by both executors: who reports, the default store for ctx.s3, and its settings. */
export interface ExecutorSettings {
  readonly identity: ReportIdentity;
  readonly bucket: JobS3Options["bucket"];
  readonly s3: S3Settings;
}

/** ctx.s3's options for a job run with `settings` (the job's own s3Config is added by executeJob). */
export function s3Options(settings: ExecutorSettings): Omit<JobS3Options, "signal" | "log" | "jobId"> {
  return { s3Config: undefined, bucket: settings.bucket, ...settings.s3 };
}

/** Runs handlers on the main thread: cheapest, but a handler that ignores its signal cannot be stopped. */
export class InProcessExecutor implements Executor {
  readonly #definition: HandlerDefinition;
  readonly #settings: ExecutorSettings;

  constructor(definition: HandlerDefinition, settings: ExecutorSettings) {
    this.#definition = definition;
    this.#settings = settings;
  }

  run(request: ExecRequest, hooks: ExecuteHooks): ExecHandle {
    const controller = new AbortController();
    const startedAt = Date.now();
    const outcome = executeJob({
      definition: this.#definition,
      job: request.job,
      signal: controller.signal,
      deadline: startedAt + request.timeoutMs,
      log: request.log,
      identity: this.#settings.identity,
      s3: s3Options(this.#settings),
      hooks,
    });
    let ended = false;
    void outcome.finally(() => {
      ended = true;
    });
    return {
      started: Promise.resolve(startedAt),
      outcome,
      // Inert once the outcome exists: a late stop must not fire a signal the handler left behind.
      abort: (reason) => {
        if (!ended) controller.abort(reason);
      },
      hardStop: async () => false,
    };
  }

  async close(): Promise<void> {}
}
