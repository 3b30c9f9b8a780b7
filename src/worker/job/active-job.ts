import type { Logger } from "pino";
import type { ClockTimer } from "../../clock.js";
import { RunletError } from "../../errors.js";
import type { BatchInfo, ExecuteOutcome } from "../../handler/execute.js";
import { finalBodyText, type JobResult } from "../../handler/outcome.js";
import { jobSecrets, redactText } from "../../log/redact-text.js";
import { withBatchQuery } from "../../protocol/batch-query.js";
import type { DeliveredJob } from "../../protocol/index.js";
import { StateMachine, type Transitions } from "../../state-machine.js";
import type { JobRunHandle } from "../runner/runner.js";
import { armHardStop } from "./hard-stop.js";
import { jobTimeoutMs, timeoutMessage, WATCHDOG_SLACK_MS } from "./job-deadline.js";
import { type JobParts, openOutbox } from "./job-parts.js";
import { fitResult } from "./offload.js";
import type { JobOutbox } from "./outbox.js";

/**
 * One job on the main thread: its deadline and hard stop, its outbox, and the final result
 * (docs/architecture.md, "Decisions", items 2, 3 and 7). The handler itself runs on a runner. Its life is one
 * state ({@link ActiveJobState}) changed only by {@link ActiveJob.transition}'s table, so "may it
 * still report?", "may it be aborted?" and "is the watchdog armed?" are each one question.
 */

/**
 * - `starting`: built, its handler not yet allowed to run.
 * - `running`: the handler runs; its result will be reported. The watchdog is armed on entering.
 * - `timed-out`: the deadline passed and the handler was aborted; a timeout is reported.
 * - `stopping`: job-stop named it while its handler runs: aborted, nothing more is posted.
 * - `settling`: the handler ended; its result is being fitted (offloaded) before it is queued.
 * - `reporting`: the final result is queued; the outbox posts it.
 * - `stopped`: job-stop named it and its handler has ended: nothing more happens.
 */
export type ActiveJobState =
  | "starting"
  | "running"
  | "timed-out"
  | "stopping"
  | "settling"
  | "reporting"
  | "stopped";

/** The states each state may move to. */
const NEXT: Transitions<ActiveJobState> = {
  starting: ["running", "reporting"],
  running: ["timed-out", "stopping", "settling", "reporting"],
  "timed-out": ["stopping", "reporting"],
  stopping: ["stopped"],
  settling: ["stopped", "reporting"],
  reporting: [],
  stopped: [],
};

/** States in which the handler may still be running (an abort or hard stop can reach it). */
const HANDLER_RUNS: ReadonlySet<ActiveJobState> = new Set(["running", "timed-out", "stopping"]);

/** A job the worker is running or still reporting. */
export class ActiveJob {
  readonly id: string;
  readonly #parts: JobParts;
  readonly #job: DeliveredJob;
  readonly #log: Logger;
  readonly #outbox: JobOutbox;
  readonly #timeoutMs: number;
  readonly #startedAt = Date.now();
  readonly #machine: StateMachine<ActiveJobState>;
  #handle: JobRunHandle | undefined;
  /** The deadline and hard-stop timers, on the worker's clock. */
  #timers: ClockTimer[] = [];
  /** The deadline the watchdog is armed for (epoch ms, real time: the thread reads Date.now()); 0 when unarmed. */
  #watchedDeadline = 0;
  /** The handler returned a generator: every final post of this job uses `isStream=true` (docs/protocol.md, "Results"). */
  #streaming = false;
  /** It streamed with no job-stream URL configured: its result is replaced by that error. */
  #missingStreamUrl = false;
  /** Resolves when the job holds its slot no more: reported (or discarded) and its handler settled or killed. */
  readonly finished: Promise<void>;
  /** Resolves when the job's posts are done (delivered, replaced, given up or discarded). */
  readonly reported: Promise<unknown>;

  constructor(job: DeliveredJob, parts: JobParts) {
    this.id = job.id;
    this.#job = job;
    this.#parts = parts;
    this.#log = parts.log.child({ requestId: job.id });
    this.#machine = new StateMachine(`job ${job.id}`, NEXT, "starting", "RUNLET_WORKER_STATE");
    this.#timeoutMs = jobTimeoutMs(job, parts.definition.executionTimeoutMs);
    const { outbox, reported } = openOutbox(job.id, parts, this.#log, parts.events);
    this.#outbox = outbox;
    this.reported = reported;
    this.finished = this.#start().catch(async (err: unknown) => {
      // The one sink of this job's promise (every floating promise ends in one): a throw in the worker's own steps still
      // ends as the job's failure, never as an unhandled rejection that takes the process down.
      this.#clearTimers();
      this.#unwatch();
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

  /** Where the job is in its life. */
  get state(): ActiveJobState {
    return this.#machine.state;
  }

  /** True once job-stop named this job: the platform no longer counts it as running. */
  get stopRequested(): boolean {
    return this.#state === "stopping" || this.#state === "stopped";
  }

  /**
   * Moves to `to` if the table allows it from the current state, running what entering `to`
   * does; false (and nothing changes) otherwise.
   */
  transition(to: ActiveJobState): boolean {
    return this.#machine.move(to);
  }

  get #state(): ActiveJobState {
    return this.#machine.state;
  }

  /** The in-process watchdog on the heartbeat thread, when the worker may end the process. */
  get #watchdog() {
    const { definition, config, heartbeat } = this.#parts;
    return definition.isolation === "in-process" && config.exitOnHardStop ? heartbeat : undefined;
  }

  /** Arms (or re-arms) the watchdog for a deadline at `deadline` (epoch ms). */
  #watch(deadline: number): void {
    const watchdog = this.#watchdog;
    if (watchdog === undefined) return;
    this.#watchedDeadline = deadline;
    const at = deadline + this.#parts.definition.hardStopGraceMs + WATCHDOG_SLACK_MS;
    watchdog.watch(this.id, at, this.#timeoutMs, this.#streaming);
  }

  #unwatch(): void {
    if (this.#watchedDeadline === 0) return;
    this.#watchedDeadline = 0;
    this.#watchdog?.unwatch(this.id);
  }

  async #start(): Promise<void> {
    const { config, definition, scheduler } = this.#parts;
    this.#log.info("Started.");
    this.#parts.events?.emit("started", { jobId: this.id });
    const streamUrl = config.urls.stream(this.id);
    this.transition("running");
    // These hooks are where the handler's progress and chunks land, on whichever runner it runs
    // (a thread's messages are relayed to them by ThreadRunner).
    const handle = scheduler.run(
      {
        job: this.#job,
        timeoutMs: this.#timeoutMs,
        log: this.#log,
        // Launched: the runner calls this synchronously just before the handler can run, so a
        // handler that blocks the main thread from its first line (or its input validator) is
        // watched; a batch's job waiting for its seat is not. Disarmed when the outcome exists or
        // the main thread hard-stops it itself.
        onLaunch: (at) => {
          this.#parts.events?.emit("launched", { jobId: this.id, at });
          if (this.#state === "running") this.#watch(at + this.#timeoutMs);
        },
      },
      {
        validated: (ok, startedAt) =>
          this.#parts.events?.emit("validated", { jobId: this.id, ok, startedAt }),
        wrapHandler: (log, run) => this.#parts.events?.wrapHandler(this.id, log, run) ?? run(log),
        streaming: () => {
          this.#streaming = true;
          // A watchdog armed before the handler turned out to stream must post its failure as a stream's final.
          if (this.#watchedDeadline !== 0) this.#watch(this.#watchedDeadline);
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
    this.#handle = handle;
    // The clock runs from the handler's start: an isolation thread's loading is not the job's time.
    const outcomeOrStart = await Promise.race([handle.started, handle.outcome.then(() => undefined)]);
    const deadline = (outcomeOrStart ?? Date.now()) + this.#timeoutMs;
    if (this.#state === "running") {
      this.#timers.push(
        config.clock.setTimeout(() => this.#onDeadline(), Math.max(0, deadline - Date.now())),
      );
      this.#watch(deadline);
    }
    const outcome = await handle.outcome;
    this.#clearTimers();
    this.#unwatch();
    if (this.#state === "stopping") this.transition("stopped");
    else if (this.#state === "timed-out") this.#finalize(this.#timeoutError());
    else this.transition("settling");
    await this.#settle(outcome);
    await this.#outbox.done;
  }

  #clearTimers(): void {
    for (const timer of this.#timers) this.#parts.config.clock.clearTimeout(timer);
    this.#timers = [];
  }

  #onDeadline(): void {
    if (!this.transition("timed-out")) return;
    this.#log.warn({ timeoutMs: this.#timeoutMs }, "the job reached its deadline; aborting its signal");
    this.#handle?.abort(new RunletError("RUNLET_JOB_TIMEOUT", timeoutMessage(this.#timeoutMs)));
    this.#armHardStop();
  }

  /** After the grace, a handler that still runs is stopped by force (or, in-process, the worker gives up on itself). */
  #armHardStop(): void {
    this.#timers.push(
      armHardStop({
        clock: this.#parts.config.clock,
        graceMs: this.#parts.definition.hardStopGraceMs,
        log: this.#log,
        message: "the handler ignored its aborted signal; hard-stopping it",
        fields: {},
        stillRuns: () => HANDLER_RUNS.has(this.#state),
        stop: async () => {
          // The main thread stops it itself (or gives up on it): the watchdog need not.
          this.#unwatch();
          return (await this.#handle?.hardStop()) ?? false;
        },
        ranAway: () => {
          if (this.#state === "timed-out") this.#finalize(this.#timeoutError());
          this.#parts.facts.runaway(this.id);
        },
      }),
    );
  }

  #timeoutError(): JobResult {
    return {
      kind: "error",
      message: timeoutMessage(this.#timeoutMs),
      code: "RUNLET_JOB_TIMEOUT",
      stopPod: this.#parts.definition.refreshWorker,
    };
  }

  /** job-stop named this job: abort it and post nothing more for it. */
  stop(): void {
    const handlerRuns = HANDLER_RUNS.has(this.#state);
    if (!this.transition(handlerRuns ? "stopping" : "stopped")) return;
    this.#log.info("the platform asked to stop this job; aborting it, nothing more is posted");
    this.#outbox.discard();
    // After the handler returned (its result still being settled, e.g. offloaded to S3) there is
    // nothing to abort: a hard stop then would end an innocent worker or another job's thread.
    if (!handlerRuns) return;
    this.#handle?.abort(new RunletError("RUNLET_JOB_STOPPED", "the platform stopped this job"));
    this.#armHardStop();
  }

  /** The worker is shutting down and the grace ran out: abort and report the job as failed. */
  shutdown(reason: string): void {
    if (this.#state !== "running" && this.#state !== "timed-out") return;
    const message = `worker shutting down: ${reason}`;
    this.#handle?.abort(new RunletError("RUNLET_JOB_SHUTDOWN", message));
    this.#finalize({
      kind: "error",
      message,
      code: "RUNLET_JOB_SHUTDOWN",
      stopPod: this.#parts.definition.refreshWorker,
    });
  }

  async #settle(outcome: ExecuteOutcome | "killed"): Promise<void> {
    if (outcome !== "killed" && outcome.unfit !== undefined) {
      // The reason goes out in the unhealthy ping: the job's s3Config keys leave it here (the rest, in the lifecycle).
      this.#parts.facts.unfit(
        outcome.unfit.check,
        redactText(outcome.unfit.reason, this.#log, jobSecrets(this.#job)),
      );
    }
    // Stopped, or already reported (shutdown, a runaway's timeout): nothing of the outcome is posted.
    if (this.#state !== "settling") return;
    if (outcome === "killed") return this.#finalize(this.#timeoutError());
    let result = outcome.result;
    if (this.#missingStreamUrl) {
      result = {
        kind: "error",
        message: "this handler streams but RUNPOD_WEBHOOK_POST_STREAM is not set",
        code: "RUNLET_JOB_FAILED",
        stopPod: result.stopPod,
      };
    }
    const fittingAt = Date.now();
    const fitted = await fitResult(result, this.#job, this.#parts, this.#log);
    if (fitted !== result && result.kind === "output") {
      const bytes = Buffer.byteLength(result.json);
      const ok = fitted.kind === "output";
      this.#parts.events?.emit("offloaded", { jobId: this.id, bytes, ok, startedAt: fittingAt });
    }
    this.#finalize(fitted, outcome.metrics, outcome.batch);
  }

  #finalize(reported: JobResult, metrics: Record<string, number | string> = {}, batch?: BatchInfo): void {
    if (!this.transition("reporting")) return;
    // An error leaves the worker scrubbed as the log is (the API key, URL credentials, the job's s3Config keys).
    const result =
      reported.kind === "error"
        ? { ...reported, message: redactText(reported.message, this.#log, jobSecrets(this.#job)) }
        : reported;
    const isStream = this.#streaming || (result.kind === "output" && result.stream);
    const url = withBatchQuery(this.#parts.config.urls.done(this.id, isStream), batch);
    this.#outbox.final(url, finalBodyText(result), result.stopPod);
    if (result.stopPod) this.#parts.facts.refresh(this.id);
    const executionTimeMs = Date.now() - this.#startedAt;
    if (result.kind === "output") {
      this.#log.info({ executionTimeMs, metrics }, "Finished.");
      this.#parts.events?.emit("finished", { jobId: this.id, executionTimeMs, metrics, batch });
    } else {
      this.#log.warn(
        { executionTimeMs, metrics, code: result.code, error: result.message.slice(0, 500) },
        "Finished.",
      );
      this.#parts.events?.emit("failed", {
        jobId: this.id,
        executionTimeMs,
        metrics,
        code: result.code,
        message: result.message,
        batch,
      });
    }
  }
}
