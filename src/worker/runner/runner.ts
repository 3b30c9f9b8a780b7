import type { Logger } from "pino";
import type { Clock } from "../../clock.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { executeRun } from "../../handler/execute-run.js";
import type { ReportIdentity } from "../../handler/outcome.js";
import type { JobS3Options } from "../../s3/types.js";
import { type Run, RunEnd, type RunHandle } from "./run.js";
import { runSetup, runTeardown, type SetupOutcome } from "./setup.js";

/**
 * Where jobs run: on the main thread, or in killable worker threads (see thread-runner.ts). A
 * runner sees runs (run.ts) and nothing else: a run of one job or a batch, one handle each.
 */

export type { Run, RunHandle, RunJob } from "./run.js";

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
 * scheduler (scheduler.ts) launches: a run of N ≥ 1 jobs (run.ts), the only unit it sees. The
 * worker picks one at start (worker-parts.ts, createRunner); both implement every member.
 */
export interface Runner {
  /**
   * Whether {@link RunHandle.hardStop} can end a run that ignores its signal (a thread can be
   * terminated; the main thread cannot, so an in-process runaway needs the worker replaced).
   */
  readonly canHardStop: boolean;
  /** Starts `run` at once; calls each job's `onLaunch` synchronously before its handler can run. */
  run(run: Run): RunHandle;
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
  readonly canHardStop = false;
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

  run(run: Run): RunHandle {
    const startedAt = Date.now();
    const controllers = run.jobs.map(() => new AbortController());
    // A batch's own signal; a plain run's is its jobs' (no controller made for it: one a job is enough).
    const batchController = run.batchId === undefined ? undefined : new AbortController();
    for (const job of run.jobs) job.onLaunch(startedAt);
    const outcomes = executeRun({
      definition: this.#definition,
      batchId: run.batchId,
      members: run.jobs.map((job, index) => ({
        job: job.job,
        parsed: job.parsed,
        signal: controllers[index]!.signal,
        deadline: startedAt + job.timeoutMs,
        log: job.log,
        hooks: job.hooks,
      })),
      signal: (batchController ?? controllers[0]!).signal,
      log: run.log,
      identity: this.#settings.identity,
      s3: s3Options(this.#settings),
      state: this.#state,
    });
    const end = RunEnd.after(outcomes);
    return {
      started: Promise.resolve(startedAt),
      outcomes,
      abort: end.guard((reason: Error, index?: number) => {
        if (index !== undefined) controllers[index]?.abort(reason);
        else if (batchController !== undefined) batchController.abort(reason);
        else for (const controller of controllers) controller.abort(reason);
      }),
      // The main thread cannot end a call by force: false while it runs, true once nothing is left to stop.
      hardStop: async () => end.ended,
    };
  }

  async close(): Promise<void> {}
}
