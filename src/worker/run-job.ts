import type { Logger } from "pino";
import type { ClockTimer } from "../clock.js";
import { RunletError } from "../errors.js";
import type { HandlerDefinition } from "../handler/define-handler.js";
import type { ExecuteOutcome } from "../handler/execute.js";
import { finalBodyText, type JobResult } from "../handler/outcome.js";
import type { DeliveredJob } from "../protocol/index.js";
import type { WorkerEventHub } from "./events.js";
import type { Executor } from "./executor.js";
import type { Heartbeat } from "./heartbeat.js";
import { fitResult, type OffloadParts } from "./offload-output.js";
import { JobOutbox } from "./outbox.js";
import type { PlatformHttp } from "./platform-http.js";
import type { WorkerStopper } from "./worker-stopper.js";

/**
 * One job on the main thread: its deadline and hard stop, its outbox, and the final result
 * (docs/architecture.md, "Decisions", items 2, 3 and 7). The handler itself runs in an executor.
 */

/** The worker's parts a job uses, built once by the worker (its `config`, `giveUp` and `s3` also offload outputs). */
export interface JobParts extends OffloadParts {
  readonly definition: HandlerDefinition;
  readonly http: PlatformHttp;
  readonly executor: Executor;
  readonly heartbeat: Heartbeat | undefined;
  readonly log: Logger;
  /** The worker's lifecycle events (taken, started, progress, finished, failed, retrying). */
  readonly events?: WorkerEventHub;
  /**
   * Told when a job makes the worker stop: its handler ran away (ignored its signal past the
   * grace), threw a WorkerUnfitError (docs/protocol.md, "Unfit workers"), or its result asks for a new worker (`stopPod`: the
   * platform replaces this worker, so it takes no further job, as the reference worker does).
   */
  readonly stopper: WorkerStopper;
}

/** The watchdog fires this long after the main thread's own hard stop, so it acts only when the main thread is stuck. */
const WATCHDOG_SLACK_MS = 1_000;

/** A job's time limit: a positive integer `policy.executionTimeout`, else the handler's. */
export function jobTimeoutMs(job: DeliveredJob, fallbackMs: number): number {
  const policy = job.policy;
  if (typeof policy === "object" && policy !== null) {
    const value = (policy as { executionTimeout?: unknown }).executionTimeout;
    if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) return value;
  }
  return fallbackMs;
}

/**
 * The error of a job that ran out of time. A string for the watchdog's template (heartbeat.ts's
 * WATCH_TIMEOUT_MARK), which puts the number in on the heartbeat thread.
 */
export function timeoutMessage(timeoutMs: number | string): string {
  return `job timed out after ${timeoutMs} ms (executionTimeout)`;
}

/** The final job-done body for a job the worker fails itself (bad job, extra batch item, watchdog). */
export function failureBody(message: string, stopPod = false): string {
  return finalBodyText({ kind: "error", message, code: "RUNLET_JOB_FAILED", stopPod });
}

type State = "running" | "timed-out" | "stopped" | "shutdown" | "finished";

/** A job the worker is running or still reporting. */
export class ActiveJob {
  readonly id: string;
  readonly #parts: JobParts;
  readonly #job: DeliveredJob;
  readonly #log: Logger;
  readonly #outbox: JobOutbox;
  readonly #timeoutMs: number;
  readonly #startedAt = Date.now();
  #state: State = "running";
  #abort: ((reason: Error) => void) | undefined;
  #hardStop: (() => Promise<boolean>) | undefined;
  /** The deadline and hard-stop timers, on the worker's clock. */
  #timers: ClockTimer[] = [];
  #missingStreamUrl = false;
  #stopRequested = false;
  /** The executor's outcome exists: the handler no longer runs, so nothing may abort or hard-stop it. */
  #handlerEnded = false;
  /** The handler returned a generator: every final post of this job uses `isStream=true` (docs/protocol.md, "Results"). */
  #streaming = false;
  /** Resolves when the job holds its slot no more: reported (or discarded) and its handler settled or killed. */
  readonly finished: Promise<void>;
  /** Resolves when the job's posts are done (delivered, replaced, given up or discarded). */
  readonly reported: Promise<unknown>;

  constructor(job: DeliveredJob, parts: JobParts) {
    this.id = job.id;
    this.#job = job;
    this.#parts = parts;
    this.#log = parts.log.child({ requestId: job.id });
    this.#timeoutMs = jobTimeoutMs(job, parts.definition.executionTimeoutMs);
    this.#outbox = new JobOutbox({
      jobId: job.id,
      http: parts.http,
      log: this.#log,
      giveUp: parts.giveUp,
      clock: parts.config.clock,
      retry: parts.config.postRetry,
      ...(parts.events === undefined ? {} : { events: parts.events }),
    });
    this.reported = this.#outbox.done;
    this.finished = this.#start().catch(async (err: unknown) => {
      // The one sink of this job's promise (every floating promise ends in one sink): a throw in the worker's own steps still
      // ends as the job's failure, never as an unhandled rejection that takes the process down.
      this.#clearTimers();
      this.#log.error({ err }, "running this job failed inside the worker; reporting it as failed");
      this.#finalize({
        kind: "error",
        message: `the worker failed while running this job: ${(err as Error)?.message ?? String(err)}`,
        code: "RUNLET_JOB_FAILED",
        stopPod: parts.definition.refreshWorker,
      });
      await this.#outbox.done;
    });
  }

  async #start(): Promise<void> {
    const { config, definition, executor } = this.#parts;
    this.#log.info("Started.");
    this.#parts.events?.emit("started", { jobId: this.id });
    const streamUrl = config.urls.stream(this.id);
    let rearmWatchdog: (() => void) | undefined;
    // These hooks are where the handler's progress and chunks land, on whichever executor it runs
    // (a thread's messages are relayed to them by ThreadExecutor).
    const handle = executor.run(
      { job: this.#job, timeoutMs: this.#timeoutMs, log: this.#log },
      {
        streaming: () => {
          this.#streaming = true;
          // A watchdog armed before the handler turned out to stream must post its failure as a stream's final.
          rearmWatchdog?.();
        },
        progress: (json) => {
          if (this.#state !== "running") return;
          this.#outbox.progress(config.urls.done(this.id, false), json);
          this.#parts.events?.emit("progress", { jobId: this.id, body: json });
        },
        chunks: async (bodies) => {
          if (this.#state !== "running") return;
          if (streamUrl === undefined) {
            this.#missingStreamUrl = true;
            return;
          }
          this.#outbox.chunks(streamUrl, bodies);
          await this.#outbox.waitBelow(definition.maxBufferedStreamBytes);
        },
      },
    );
    this.#abort = handle.abort;
    this.#hardStop = handle.hardStop;
    // The clock runs from the handler's start: an isolation thread's loading is not the job's time.
    const outcomeOrStart = await Promise.race([handle.started, handle.outcome.then(() => undefined)]);
    const deadline = (outcomeOrStart ?? Date.now()) + this.#timeoutMs;
    if (this.#state === "running") {
      this.#timers.push(
        this.#parts.config.clock.setTimeout(() => this.#onDeadline(), Math.max(0, deadline - Date.now())),
      );
    }
    const watchdog =
      definition.isolation === "in-process" && config.exitOnHardStop ? this.#parts.heartbeat : undefined;
    const arm = () =>
      watchdog?.watch(
        this.id,
        deadline + definition.hardStopGraceMs + WATCHDOG_SLACK_MS,
        this.#timeoutMs,
        this.#streaming,
      );
    arm();
    rearmWatchdog = watchdog === undefined ? undefined : arm;
    const outcome = await handle.outcome;
    this.#handlerEnded = true;
    this.#clearTimers();
    watchdog?.unwatch(this.id);
    await this.#settle(outcome);
    await this.#outbox.done;
  }

  #clearTimers(): void {
    for (const timer of this.#timers) this.#parts.config.clock.clearTimeout(timer);
    this.#timers = [];
  }

  #timeoutMessage(): string {
    return timeoutMessage(this.#timeoutMs);
  }

  #onDeadline(): void {
    if (this.#state !== "running") return;
    this.#state = "timed-out";
    this.#log.warn({ timeoutMs: this.#timeoutMs }, "the job reached its deadline; aborting its signal");
    this.#abort?.(new RunletError("RUNLET_JOB_TIMEOUT", this.#timeoutMessage()));
    this.#armHardStop();
  }

  /** After the grace, a handler that still runs is stopped by force (or, in-process, the worker gives up on itself). */
  #armHardStop(): void {
    const { definition } = this.#parts;
    this.#timers.push(
      this.#parts.config.clock.setTimeout(() => {
        void (async () => {
          if (this.#state === "finished" || this.#handlerEnded) return;
          this.#log.error(
            { graceMs: definition.hardStopGraceMs },
            "the handler ignored its aborted signal; hard-stopping it",
          );
          this.#parts.heartbeat?.unwatch(this.id);
          const stopped = await this.#hardStop?.();
          if (stopped) return; // the executor's outcome ("killed") settles the job
          if (this.#state === "timed-out") this.#finalize(this.#timeoutError());
          this.#parts.stopper.runaway(this.id);
        })().catch((err: unknown) => this.#log.error({ err }, "hard-stopping the handler failed"));
      }, definition.hardStopGraceMs),
    );
  }

  #timeoutError(): JobResult {
    return {
      kind: "error",
      message: this.#timeoutMessage(),
      code: "RUNLET_JOB_TIMEOUT",
      stopPod: this.#parts.definition.refreshWorker,
    };
  }

  /** True once job-stop named this job: the platform no longer counts it as running. */
  get stopRequested(): boolean {
    return this.#stopRequested;
  }

  /** job-stop named this job: abort it and post nothing more for it. */
  stop(): void {
    if (this.#state === "finished" || this.#state === "stopped") return;
    this.#state = "stopped";
    this.#stopRequested = true;
    this.#log.info("the platform asked to stop this job; aborting it, nothing more is posted");
    this.#outbox.discard();
    // After the handler returned (its result still being settled, e.g. offloaded to S3) there is
    // nothing to abort: a hard stop then would end an innocent worker or another job's thread.
    if (this.#handlerEnded) return;
    this.#abort?.(new RunletError("RUNLET_JOB_STOPPED", "the platform stopped this job"));
    this.#armHardStop();
  }

  /** The worker is shutting down and the grace ran out: abort and report the job as failed. */
  shutdown(reason: string): void {
    if (this.#state !== "running" && this.#state !== "timed-out") return;
    const message = `worker shutting down: ${reason}`;
    this.#abort?.(new RunletError("RUNLET_JOB_SHUTDOWN", message));
    this.#state = "shutdown";
    this.#finalize({
      kind: "error",
      message,
      code: "RUNLET_JOB_SHUTDOWN",
      stopPod: this.#parts.definition.refreshWorker,
    });
  }

  async #settle(outcome: ExecuteOutcome | "killed"): Promise<void> {
    if (outcome !== "killed" && outcome.unfit !== undefined) {
      void this.#parts.stopper.unfit(outcome.unfit.check, outcome.unfit.reason);
    }
    const state = this.#state;
    if (state === "stopped" || state === "shutdown" || state === "finished") return;
    if (state === "timed-out" || outcome === "killed") return this.#finalize(this.#timeoutError());
    let result = outcome.result;
    if (this.#missingStreamUrl) {
      result = {
        kind: "error",
        message: "this handler streams but RUNPOD_WEBHOOK_POST_STREAM is not set",
        code: "RUNLET_JOB_FAILED",
        stopPod: result.stopPod,
      };
    }
    this.#finalize(await fitResult(result, this.#job, this.#parts, this.#log), outcome.metrics);
  }

  #finalize(result: JobResult, metrics: Record<string, number | string> = {}): void {
    if (this.#state === "finished" || this.#state === "stopped") return;
    this.#state = "finished";
    const isStream = this.#streaming || (result.kind === "output" && result.stream);
    const url = this.#parts.config.urls.done(this.id, isStream);
    this.#outbox.final(url, finalBodyText(result), result.stopPod);
    if (result.stopPod) this.#parts.stopper.refresh(this.id);
    const executionTimeMs = Date.now() - this.#startedAt;
    if (result.kind === "output") {
      this.#log.info({ executionTimeMs, metrics }, "Finished.");
      this.#parts.events?.emit("finished", { jobId: this.id, executionTimeMs });
    } else {
      this.#log.warn(
        { executionTimeMs, metrics, code: result.code, error: result.message.slice(0, 500) },
        "Finished.",
      );
      this.#parts.events?.emit("failed", {
        jobId: this.id,
        executionTimeMs,
        code: result.code,
        message: result.message,
      });
    }
  }
}
