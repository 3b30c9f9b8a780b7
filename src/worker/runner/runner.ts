import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { type ExecuteHooks, type ExecuteOutcome, executeJob } from "../../handler/execute.js";
import { executeBatch } from "../../handler/execute-batch.js";
import type { ReportIdentity } from "../../handler/outcome.js";
import type { DeliveredJob } from "../../protocol/index.js";
import type { JobS3Options } from "../../s3/types.js";
import type { BatchRun, BatchRunRequest } from "./batch-runner.js";
import { runSetup, runTeardown, type SetupOutcome } from "./setup.js";

/** Where jobs run: on the main thread, or in killable worker threads (see thread-runner.ts). */

/** One job handed to a scheduler, and by it to a runner. */
export interface JobRunRequest {
  readonly job: DeliveredJob;
  /** The job's time limit; its clock starts when the handler starts (after a thread has loaded). */
  readonly timeoutMs: number;
  readonly log: Logger;
  /**
   * The job is launched: every runner calls this synchronously just before the job's handler
   * can run (at once for a plain handler; when its batch takes its seat for a batch handler), with
   * the epoch ms it starts at. ActiveJob arms its watchdog here, the one place for both kinds, so
   * a job waiting for its turn is never taken for one holding the main thread.
   */
  readonly onLaunch: (at: number) => void;
}

/** A running job, made by the scheduler or runner that runs it (its abort and hard stop differ). */
export interface JobRunHandle {
  /** Resolves with the epoch ms at which the handler started (its deadline is that plus the timeout). */
  readonly started: Promise<number>;
  /** Resolves with what the handler produced; `"killed"` after a hard stop, never rejects. */
  readonly outcome: Promise<ExecuteOutcome | "killed">;
  /** Fires the job's signal with `reason`; does nothing once `outcome` has settled. */
  abort(reason: Error): void;
  /**
   * Ends the handler by force; false when its runner cannot (in-process). Once `outcome` has
   * settled it does nothing (true: nothing is left to stop).
   */
  hardStop(): Promise<boolean>;
}

/**
 * Whether a run (a job or a batch) has ended: the one "do nothing once ended" guard of every
 * runner. A late abort must not fire a signal the handler left behind, and a late hard stop must
 * not end a thread that already serves another job.
 */
export class RunEnd {
  #ended = false;

  /** Ended once `outcome` settles (a run on the main thread). */
  static after(outcome: Promise<unknown>): RunEnd {
    const end = new RunEnd();
    void outcome.finally(() => end.end());
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

/** What a runner's setup reports to the worker while it runs. */
export interface RunnerStart {
  /** The worker closing: setup's signal fires and setup ends as failed. */
  readonly closing: AbortSignal;
  /** setup's `progress(text)`, once per call. */
  progress(text: string): void;
}

/**
 * Where the handler lives and runs: on the main thread ({@link InProcessRunner}) or in isolation
 * threads (ThreadRunner, thread-runner.ts). It owns what `setup` made there, and runs what a
 * scheduler (scheduler.ts) launches: one job (`run`) or a batch (`runBatch`). The worker picks one
 * at start (worker-parts.ts, createRunner); both implement every member.
 */
export interface Runner {
  /** Runs one job at once; calls `request.onLaunch` synchronously before its handler can run. */
  run(request: JobRunRequest, hooks: ExecuteHooks): JobRunHandle;
  /** Runs a launched batch at once (batch-scheduler.ts fills it and keeps each job's fate). */
  runBatch(request: BatchRunRequest): BatchRun;
  /**
   * The runner's start-up phase (after fitness, cache and sidecars): nothing runs before it (no
   * thread is spawned by the constructor). It runs the handler's `setup` where the handler runs
   * (in-process: once; threads: it spawns the first thread, and every thread runs setup before it
   * is offered a job), `setupTimeoutMs` counting from here. Resolves once a job can be offered;
   * a failed outcome means the worker is unfit (`check=setup`). Never rejects.
   */
  start(start: RunnerStart): Promise<SetupOutcome>;
  /** Runs the handler's `teardown` where setup ran, for at most `withinMs`. Never rejects. */
  teardown(withinMs: number): Promise<void>;
  close(): Promise<void>;
}

/** How ctx.s3 behaves, resolved once from the worker's options and the handler's. */
export interface S3Settings {
  readonly allowPrivateAddresses: boolean;
  readonly presignExpiresSec: number;
  /** Undefined: os.tmpdir(). */
  readonly tmpRoot: string | undefined;
}

/** Shared by both runners: who reports, the default store for ctx.s3, and its settings. */
export interface RunnerSettings {
  readonly identity: ReportIdentity;
  readonly bucket: JobS3Options["bucket"];
  readonly s3: S3Settings;
}

/** ctx.s3's options for a job run with `settings` (the job's own s3Config is added by executeJob). */
export function s3Options(settings: RunnerSettings): Omit<JobS3Options, "signal" | "log" | "jobId"> {
  return { s3Config: undefined, bucket: settings.bucket, ...settings.s3 };
}

/**
 * Runs handlers on the main thread: cheapest, but a handler that ignores its signal cannot be
 * stopped. `setup` runs once here, and its state is shared by every concurrent job.
 */
export class InProcessRunner implements Runner {
  readonly #definition: HandlerDefinition;
  readonly #settings: RunnerSettings;
  readonly #log: Logger;
  readonly #clock: Clock;
  /** What setup returned; undefined until it did (and without a setup). */
  #state: unknown;
  #setUp = false;

  constructor(definition: HandlerDefinition, settings: RunnerSettings, log: Logger, clock: Clock) {
    this.#definition = definition;
    this.#settings = settings;
    this.#log = log;
    this.#clock = clock;
  }

  async start(start: RunnerStart): Promise<SetupOutcome> {
    const outcome = await runSetup(this.#definition, {
      log: this.#log,
      clock: this.#clock,
      closing: start.closing,
      progress: (text) => start.progress(text),
    });
    if (outcome.ok) {
      this.#state = outcome.state;
      this.#setUp = true;
    }
    return outcome;
  }

  async teardown(withinMs: number): Promise<void> {
    if (!this.#setUp) return;
    this.#setUp = false;
    await runTeardown(this.#definition, this.#state, withinMs, this.#log, this.#clock);
  }

  run(request: JobRunRequest, hooks: ExecuteHooks): JobRunHandle {
    const controller = new AbortController();
    const startedAt = Date.now();
    request.onLaunch(startedAt);
    const outcome = executeJob({
      definition: this.#definition,
      job: request.job,
      signal: controller.signal,
      deadline: startedAt + request.timeoutMs,
      log: request.log,
      identity: this.#settings.identity,
      s3: s3Options(this.#settings),
      hooks,
      state: this.#state,
    });
    const end = RunEnd.after(outcome);
    return {
      started: Promise.resolve(startedAt),
      outcome,
      abort: end.guard((reason: Error) => controller.abort(reason)),
      hardStop: async () => false,
    };
  }

  runBatch(request: BatchRunRequest): BatchRun {
    const startedAt = Date.now();
    const jobControllers = request.members.map(() => new AbortController());
    const batchController = new AbortController();
    const outcomes = executeBatch({
      definition: this.#definition,
      batchId: request.batchId,
      members: request.members.map((member, index) => ({
        job: member.job,
        parsed: member.parsed,
        signal: jobControllers[index]!.signal,
        deadline: startedAt + member.timeoutMs,
        log: member.log,
        progress: (json) => member.progress(json),
      })),
      signal: batchController.signal,
      log: request.log,
      identity: this.#settings.identity,
      state: this.#state,
    });
    const end = RunEnd.after(outcomes);
    return {
      started: Promise.resolve(startedAt),
      outcomes,
      abortJob: end.guard((index: number, reason: Error) => jobControllers[index]?.abort(reason)),
      abortBatch: end.guard((reason: Error) => batchController.abort(reason)),
      hardStop: async () => false,
    };
  }

  async close(): Promise<void> {}
}
