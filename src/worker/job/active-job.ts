import type { Logger } from "pino";
import { isRunletError, RunletError } from "../../errors.js";
import type { BatchInfo, ExecuteHooks, ExecuteOutcome } from "../../handler/execute.js";
import { finalBodyText, type JobResult } from "../../handler/outcome.js";
import { type ParsedInput, parseInput } from "../../handler/parse-input.js";
import { jobSecrets, redactText } from "../../log/redact-text.js";
import { withBatchQuery } from "../../protocol/batch-query.js";
import type { DeliveredJob } from "../../protocol/index.js";
import { StateMachine, type Transitions } from "../../state-machine.js";
import { type HeartbeatSlot, NULL_SLOT } from "../platform/heartbeat.js";
import type { RunHandle, RunJob } from "../runner/run.js";
import { JobClock, jobTimeoutMs, timeoutMessage } from "./job-clock.js";
import { type JobDeps, openOutbox } from "./job-deps.js";
import { fitResult } from "./offload.js";
import type { JobOutbox } from "./outbox.js";
import type { Launch, ScheduledJob, Seat } from "./scheduler.js";

/**
 * One job on the main thread, from admitted to reported: the only per-job state machine
 * (docs/architecture.md, "The job"). It owns what it holds: its heartbeat slot (minted by the
 * heartbeat; the null slot off the platform), its clock (deadline, grace, hard stop, watchdog;
 * job-clock.ts) and its outbox, and it takes its place in a run from its scheduler (waiting for a
 * batch's seat is one of its states). The handler itself runs on a runner. Its life is one state
 * ({@link ActiveJobState}) changed only by {@link ActiveJob.transition}'s table, so "may it still
 * report?", "may it be aborted?" and "is the watchdog armed?" are each one question.
 */

/**
 * - `admitted`: built and handed to its scheduler; a batch handler's job validates its input here.
 * - `waiting`: a batch handler's job, in the filling batch until its batch takes a seat.
 * - `running`: its run started; its result will be reported. The watchdog is armed on entering.
 * - `timed-out`: the deadline passed and the handler was aborted; a timeout is reported.
 * - `stopping`: job-stop named it while its handler runs: aborted, nothing more is posted.
 * - `settling`: the handler ended; its result is being fitted (offloaded) before it is queued.
 * - `reporting`: the final result is queued; the outbox posts it.
 * - `stopped`: job-stop named it and its handler has ended (or never ran): nothing more happens.
 */
export type ActiveJobState =
  | "admitted"
  | "waiting"
  | "running"
  | "timed-out"
  | "stopping"
  | "settling"
  | "reporting"
  | "stopped";

/** The states each state may move to. */
const NEXT: Transitions<ActiveJobState> = {
  admitted: ["waiting", "running", "reporting", "stopped"],
  waiting: ["running", "reporting", "stopped"],
  running: ["timed-out", "stopping", "settling", "reporting"],
  "timed-out": ["stopping", "reporting"],
  stopping: ["stopped"],
  settling: ["stopped", "reporting"],
  reporting: [],
  stopped: [],
};

/** States in which the handler may still be running (an abort or hard stop can reach it). */
const HANDLER_RUNS: ReadonlySet<ActiveJobState> = new Set(["running", "timed-out", "stopping"]);

/** States before the job's run started: it may leave its scheduler. */
const NOT_LAUNCHED: ReadonlySet<ActiveJobState> = new Set(["admitted", "waiting"]);

/** A job the worker is running or still reporting. */
export class ActiveJob implements ScheduledJob {
  readonly id: string;
  readonly #deps: JobDeps;
  readonly #job: DeliveredJob;
  readonly #log: Logger;
  readonly #outbox: JobOutbox;
  readonly #slot: HeartbeatSlot;
  readonly #clock: JobClock;
  readonly #startedAt = Date.now();
  readonly #machine: StateMachine<ActiveJobState>;
  /** Its run and place in it, once launched. */
  #launch: Launch | undefined;
  /** Settles the wait for the launch: with it, or undefined when the job ended before its run started. */
  #launched!: (launch: Launch | undefined) => void;
  /** A batch handler's job let go while its batch runs on: its outcome, at once. */
  #letGo: ((outcome: ExecuteOutcome) => void) | undefined;
  /** Its input as validated on admission (a batch handler's job). */
  #parsed: ParsedInput | undefined;
  /** On the worker's clock: when it joined the filling batch. */
  #joinedAt = 0;
  /** The handler returned a generator: every final post of this job uses `isStream=true` (docs/protocol.md, "Results"). */
  #streaming = false;
  /** It streamed with no job-stream URL configured: its result is replaced by that error. */
  #missingStreamUrl = false;
  readonly #hooksOfRun: ExecuteHooks;
  /** Resolves when the job holds its slot no more: reported (or discarded), its handler settled or killed, its heartbeat slot released. */
  readonly finished: Promise<void>;
  /** Resolves when the job's posts are done (delivered, replaced, given up or discarded). */
  readonly reported: Promise<unknown>;

  constructor(job: DeliveredJob, deps: JobDeps) {
    this.id = job.id;
    this.#job = job;
    this.#deps = deps;
    this.#log = deps.log.child({ requestId: job.id });
    this.#machine = new StateMachine(`job ${job.id}`, NEXT, "admitted", "RUNLET_WORKER_STATE");
    // Minted before its handler can run: one that then blocks the main thread is still named by the pings.
    this.#slot = deps.heartbeat?.slot(job.id) ?? NULL_SLOT;
    const { config, definition, scheduler } = deps;
    this.#clock = new JobClock({
      clock: config.clock,
      timeoutMs: jobTimeoutMs(job, definition.executionTimeoutMs),
      graceMs: definition.hardStopGraceMs,
      // The in-process watchdog on the heartbeat thread: where nothing can hard-stop a run and the worker may end the process.
      watchdog: !scheduler.canHardStop && config.exitOnHardStop ? this.#slot : undefined,
    });
    const { outbox, reported } = openOutbox(job.id, deps, this.#log, deps.events);
    this.#outbox = outbox;
    this.reported = reported;
    this.#hooksOfRun = this.#hooks();
    this.finished = this.#life();
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

  /** What the runner runs of this job. */
  get runJob(): RunJob {
    return {
      job: this.#job,
      timeoutMs: this.#clock.timeoutMs,
      log: this.#log,
      parsed: this.#parsed,
      hooks: this.#hooksOfRun,
      // Launched: the runner calls this synchronously just before the handler can run, so a
      // handler that blocks the main thread from its first line (or its input validator) is
      // watched; a job waiting for its batch's seat is not. Disarmed when the outcome exists or
      // the main thread hard-stops it itself.
      onLaunch: (at) => {
        this.transition("running");
        this.#deps.events?.emit("launched", { jobId: this.id, at });
        if (this.#state === "running") this.#clock.watch(at + this.#clock.timeoutMs, this.#streaming);
      },
    };
  }

  /** Where the handler's progress and chunks land, on whichever runner it runs (a thread's messages are relayed to them by ThreadRunner). */
  #hooks(): ExecuteHooks {
    const { config, definition } = this.#deps;
    const streamUrl = config.urls.stream(this.id);
    return {
      validated: (ok, startedAt) => this.#deps.events?.emit("validated", { jobId: this.id, ok, startedAt }),
      wrapHandler: (log, run) => this.#deps.events?.wrapHandler(this.id, log, run) ?? run(log),
      streaming: () => {
        this.#streaming = true;
        // A watchdog armed before the handler turned out to stream must post its failure as a stream's final.
        this.#clock.rewatch(true);
      },
      progress: (json) => {
        if (this.#state !== "running") return;
        this.#outbox.progress(config.urls.done(this.id, false), json);
        this.#deps.events?.emit("progress", { jobId: this.id, body: json });
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
    };
  }

  /**
   * A batch handler's job readies itself to wait for a seat: its input is validated alone (a bad
   * one fails at once, taking no seat). Never rejects.
   */
  async prepare(): Promise<boolean> {
    const { definition, config } = this.#deps;
    let parsed: ParsedInput;
    try {
      parsed = await parseInput(definition.input, this.#job.input);
    } catch (err) {
      parsed = {
        ok: false,
        message: `validating the input failed: ${(err as Error)?.message ?? String(err)}`,
      };
    }
    // Stopped or shut down meanwhile: it has left.
    if (this.#state !== "admitted") return false;
    if (!parsed.ok) {
      this.#finalize({
        kind: "error",
        message: parsed.message,
        code: "RUNLET_INPUT_INVALID",
        stopPod: definition.refreshWorker,
      });
      this.#launched(undefined);
      return false;
    }
    this.#parsed = parsed;
    this.#joinedAt = config.clock.now();
    return this.transition("waiting");
  }

  /** Its run started: the scheduler hands over the run and the job's place in it. */
  launch(launch: Launch): void {
    this.#launch = launch;
    this.#launched(launch);
  }

  /**
   * The job's whole life; never rejects. The one sink of this job's promise (every floating
   * promise ends in one): a throw in the worker's own steps still ends as the job's failure, never
   * as an unhandled rejection that takes the process down. Its heartbeat slot is released last.
   */
  async #life(): Promise<void> {
    try {
      await this.#start();
    } catch (err) {
      this.#clock.stop();
      this.#log.error({ err }, "running this job failed inside the worker; reporting it as failed");
      this.#finalize({
        kind: "error",
        message: `the worker failed while running this job: ${(err as Error)?.message ?? String(err)}`,
        code: "RUNLET_JOB_FAILED",
        stopPod: this.#deps.definition.refreshWorker,
      });
      await this.#outbox.done;
    } finally {
      this.#slot.release();
    }
  }

  async #start(): Promise<void> {
    this.#log.info("Started.");
    this.#deps.events?.emit("started", { jobId: this.id });
    // A plain handler's job is launched within admit(); a batch handler's waits for its seat.
    let waiting: Promise<Launch | undefined> | undefined;
    this.#launched = (launch) => {
      this.#launch = launch;
    };
    this.#deps.scheduler.admit(this);
    if (this.#launch === undefined && NOT_LAUNCHED.has(this.#state)) {
      waiting = new Promise<Launch | undefined>((resolve) => {
        this.#launched = resolve;
      });
    }
    const launch = waiting === undefined ? this.#launch : await waiting;
    if (launch === undefined) {
      // It ended before its run started (invalid, stopped, shut down).
      await this.#outbox.done;
      return;
    }
    const outcome = this.#outcomeOf(launch);
    // The clock runs from the handler's start: an isolation thread's loading is not the job's time.
    const outcomeOrStart = await Promise.race([launch.run.started, outcome.then(() => undefined)]);
    if (this.#state === "running") {
      const deadline = this.#clock.startDeadline(outcomeOrStart ?? Date.now(), () => this.#onDeadline());
      this.#clock.watch(deadline, this.#streaming);
    }
    const ended = await outcome;
    this.#clock.stop();
    if (this.#state === "stopping") this.transition("stopped");
    else if (this.#state === "timed-out") this.#finalize(this.#timeoutError());
    else this.transition("settling");
    await this.#settle(ended);
    await this.#outbox.done;
  }

  /** This job's outcome of its run: its place in the run's outcomes, or at once when let go from a batch. */
  #outcomeOf({ run, index, seat }: Launch): Promise<ExecuteOutcome | "killed"> {
    const own = run.outcomes.then((outcomes): ExecuteOutcome | "killed" => {
      if (outcomes === "killed") return "killed";
      return outcomes[index] ?? this.#failure(new Error("the run gave no outcome for this job"));
    });
    if (seat === undefined) return own;
    const letGo = new Promise<ExecuteOutcome>((resolve) => {
      this.#letGo = resolve;
    });
    return Promise.race([own, letGo]).then((outcome) => withBatch(outcome, seat, this.#joinedAt));
  }

  #onDeadline(): void {
    if (!this.transition("timed-out")) return;
    this.#log.warn({ timeoutMs: this.#clock.timeoutMs }, "the job reached its deadline; aborting its signal");
    this.#abortRun(new RunletError("RUNLET_JOB_TIMEOUT", timeoutMessage(this.#clock.timeoutMs)));
  }

  /**
   * Aborts the job's handler with `reason`. In a batch it is let go at once (its batch runs on
   * for the others); a run of its own gets the grace, then a hard stop (or, in-process, the
   * worker gives up on itself).
   */
  #abortRun(reason: Error): void {
    const launch = this.#launch;
    if (launch === undefined) return;
    if (launch.seat !== undefined) {
      launch.seat.letGo(launch.index, reason);
      this.#letGo?.(this.#failure(reason));
      return;
    }
    launch.run.abort(reason, launch.index);
    this.#armHardStop(launch.run);
  }

  /** After the grace, a handler that still runs is stopped by force (or, in-process, the worker gives up on itself). */
  #armHardStop(run: RunHandle): void {
    this.#clock.graceThen({
      log: this.#log,
      message: "the handler ignored its aborted signal; hard-stopping it",
      fields: {},
      stillRuns: () => HANDLER_RUNS.has(this.#state),
      stop: () => {
        // The main thread stops it itself (or gives up on it): the watchdog need not.
        this.#clock.unwatch();
        return run.hardStop();
      },
      ranAway: () => {
        if (this.#state === "timed-out") this.#finalize(this.#timeoutError());
        this.#deps.facts.runaway(this.id);
      },
    });
  }

  #failure(reason: Error): ExecuteOutcome {
    const code = isRunletError(reason) ? reason.code : "RUNLET_JOB_STOPPED";
    const stopPod = this.#deps.definition.refreshWorker;
    return { result: { kind: "error", message: reason.message, code, stopPod }, metrics: {} };
  }

  #timeoutError(): JobResult {
    return {
      kind: "error",
      message: timeoutMessage(this.#clock.timeoutMs),
      code: "RUNLET_JOB_TIMEOUT",
      stopPod: this.#deps.definition.refreshWorker,
    };
  }

  /** job-stop named this job: abort it (or take it from its scheduler) and post nothing more for it. */
  stop(): void {
    const state = this.#state;
    const handlerRuns = HANDLER_RUNS.has(state);
    if (!this.transition(handlerRuns ? "stopping" : "stopped")) return;
    this.#log.info("the platform asked to stop this job; aborting it, nothing more is posted");
    // The pings name only jobs the platform still counts as running: a job-stopped job leaves the
    // list at once, although its handler may hold its slot (job_in_progress) until it returns.
    this.#slot.unlist();
    this.#outbox.discard();
    if (NOT_LAUNCHED.has(state)) {
      this.#leave();
      return;
    }
    // After the handler returned (its result still being settled, e.g. offloaded to S3) there is
    // nothing to abort: a hard stop then would end an innocent worker or another job's thread.
    if (!handlerRuns) return;
    this.#abortRun(new RunletError("RUNLET_JOB_STOPPED", "the platform stopped this job"));
  }

  /** The worker is shutting down and the grace ran out: abort and report the job as failed. */
  shutdown(reason: string): void {
    const state = this.#state;
    if (state !== "running" && state !== "timed-out" && !NOT_LAUNCHED.has(state)) return;
    const message = `worker shutting down: ${reason}`;
    const error = new RunletError("RUNLET_JOB_SHUTDOWN", message);
    this.#finalize({
      kind: "error",
      message,
      code: "RUNLET_JOB_SHUTDOWN",
      stopPod: this.#deps.definition.refreshWorker,
    });
    if (NOT_LAUNCHED.has(state)) this.#leave();
    else this.#abortRun(error);
  }

  /** Leaves its scheduler before its run started: it takes no seat, and its life ends with its report. */
  #leave(): void {
    this.#deps.scheduler.withdraw(this);
    this.#launched(undefined);
  }

  async #settle(outcome: ExecuteOutcome | "killed"): Promise<void> {
    if (outcome !== "killed" && outcome.unfit !== undefined) {
      // The reason goes out in the unhealthy ping: the job's s3Config keys leave it here (the rest, in the lifecycle).
      this.#deps.facts.unfit(
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
    const fitted = await fitResult(result, this.#job, this.#deps, this.#log);
    if (fitted !== result && result.kind === "output") {
      const bytes = Buffer.byteLength(result.json);
      const ok = fitted.kind === "output";
      this.#deps.events?.emit("offloaded", { jobId: this.id, bytes, ok, startedAt: fittingAt });
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
    const url = withBatchQuery(this.#deps.config.urls.done(this.id, isStream), batch);
    this.#outbox.final(url, finalBodyText(result), result.stopPod);
    if (result.stopPod) this.#deps.facts.refresh(this.id);
    const executionTimeMs = Date.now() - this.#startedAt;
    if (result.kind === "output") {
      this.#log.info({ executionTimeMs, metrics }, "Finished.");
      this.#deps.events?.emit("finished", { jobId: this.id, executionTimeMs, metrics, batch });
    } else {
      this.#log.warn(
        { executionTimeMs, metrics, code: result.code, error: result.message.slice(0, 500) },
        "Finished.",
      );
      this.#deps.events?.emit("failed", {
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

/** `outcome` with where its batch ran (shown on the harness's dashboard). */
function withBatch(
  outcome: ExecuteOutcome | "killed",
  seat: Seat,
  joinedAt: number,
): ExecuteOutcome | "killed" {
  if (outcome === "killed") return outcome;
  const batch: BatchInfo = { id: seat.batchId, size: seat.size, waitMs: seat.startedAt - joinedAt };
  return { ...outcome, batch };
}
