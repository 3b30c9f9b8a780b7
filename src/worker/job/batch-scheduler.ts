import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import { isRunletError, RunletError } from "../../errors.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { ExecuteHooks, ExecuteOutcome } from "../../handler/execute.js";
import { type ParsedInput, parseInput } from "../../handler/parse-input.js";
import { StateMachine, type Transitions } from "../../state-machine.js";
import type { BatchWrapper } from "../events.js";
import type { BatchRun, BatchRunRequest } from "../runner/batch-runner.js";
import type { JobRunHandle, JobRunRequest, Runner } from "../runner/runner.js";
import { armHardStop } from "./hard-stop.js";
import type { Scheduler } from "./scheduler.js";

/**
 * Dynamic batching (docs/handler.md, "Batching"): a Scheduler that gathers the jobs it is given into
 * batches and runs each batch with one call of the batch handler. Each job keeps its own ActiveJob
 * (job-parts.ts), so its deadline, job-stop, progress, result and offload work as for a single job:
 * the job's handle starts when its batch starts and settles with its place in the batch's outputs,
 * or at once when the job is let go (stopped, timed out, shut down) while its batch runs on.
 *
 * The first job of an empty batch opens a window of `maxWaitMs`; the batch runs when it is full or
 * the window has closed, and a batch slot (of `concurrency`) is free; until then it keeps filling.
 * Only one batch fills at a time, so the worker's room for new jobs is what that batch lacks.
 */

/** What {@link BatchScheduler} needs from the worker. */
export interface BatchSchedulerOptions {
  /** A definition with `batch` set. */
  readonly definition: HandlerDefinition;
  /** Where the batches run (in-process or isolation threads); it owns setup's state. */
  readonly runner: Runner;
  /** The worker's clock: the window and the hard stop's grace run on it. */
  readonly clock: Clock;
  readonly log: Logger;
  /** Told when an in-process batch ignores its aborted signal past the grace (the worker must be replaced). */
  readonly runaway: (jobId: string) => void;
  /**
   * Told when the room for new jobs may have grown without a job ending (a batch started or
   * ended, a job left the filling batch): the take loop waits on it.
   */
  readonly roomChanged: () => void;
  /** Launches each batch: telemetry's seam (events.ts, `wrapBatch`). Absent: as is. */
  readonly wrapBatch?: BatchWrapper;
}

/**
 * A member's life: `validating` its input alone, `waiting` in the filling batch, `running` in a
 * launched batch, `ended` (its outcome given: settled with its batch, let go, or refused).
 */
type Phase = "validating" | "waiting" | "running" | "ended";

/** The moves each phase allows (a member may end from any phase: let go, refused, or settled). */
const PHASES: Transitions<Phase> = {
  validating: ["waiting", "ended"],
  waiting: ["running", "ended"],
  running: ["ended"],
  ended: [],
};

/** One job given to the scheduler, through its phases. */
interface Member {
  readonly request: JobRunRequest;
  readonly hooks: ExecuteHooks;
  readonly phase: StateMachine<Phase>;
  parsed: ParsedInput | undefined;
  /** On the clock: when the job joined the filling batch. */
  joinedAt: number;
  batch: Batch | undefined;
  index: number;
  resolveStarted(at: number): void;
  resolveOutcome(outcome: ExecuteOutcome | "killed"): void;
}

/** A launched batch. */
interface Batch {
  readonly id: string;
  readonly members: readonly Member[];
  readonly startedAt: number;
  run: BatchRun | undefined;
  /** Members not yet let go: when none is left, the batch's signal fires. */
  wanted: number;
  hardStopTimer: ClockTimer | undefined;
}

/** A Scheduler that runs its jobs in batches on a {@link Runner}. */
export class BatchScheduler implements Scheduler {
  readonly #options: BatchSchedulerOptions;
  readonly #maxSize: number;
  readonly #maxWaitMs: number;
  /** The filling batch. */
  #pending: Member[] = [];
  #window: ClockTimer | undefined;
  #windowClosed = false;
  /** Jobs being validated: each holds a seat until it joins or fails. */
  #validating = 0;
  readonly #running = new Set<Batch>();
  #concurrency = 1;
  #batches = 0;
  // Web Crypto's global, not node:crypto: that module is not loaded with the worker (docs/benchmarks.md, "Cold start").
  readonly #idPrefix = globalThis.crypto.randomUUID().slice(0, 8);

  constructor(options: BatchSchedulerOptions) {
    const batch = options.definition.batch;
    if (batch === undefined)
      throw new RunletError("RUNLET_HANDLER_INVALID", "BatchScheduler needs a batch handler");
    this.#options = options;
    this.#maxSize = batch.maxSize;
    this.#maxWaitMs = batch.maxWaitMs;
  }

  /**
   * `concurrency` is the number of batches that may run at once (the handler's `concurrency`, as
   * the job board holds it): a filling batch that is due and now has a seat starts.
   */
  setConcurrency(concurrency: number): void {
    this.#concurrency = concurrency;
    this.#maybeLaunch();
  }

  /**
   * How many more jobs the worker may take now: what the filling batch lacks, whatever the jobs
   * held (the batches running hold theirs). A pure query.
   */
  room(_held: number): number {
    return Math.max(0, this.#maxSize - this.#pending.length - this.#validating);
  }

  run(request: JobRunRequest, hooks: ExecuteHooks): JobRunHandle {
    let resolveStarted!: (at: number) => void;
    let resolveOutcome!: (outcome: ExecuteOutcome | "killed") => void;
    const started = new Promise<number>((resolve) => {
      resolveStarted = resolve;
    });
    const outcome = new Promise<ExecuteOutcome | "killed">((resolve) => {
      resolveOutcome = resolve;
    });
    const member: Member = {
      request,
      hooks,
      phase: new StateMachine(`batch member ${request.job.id}`, PHASES, "validating", "RUNLET_WORKER_STATE"),
      parsed: undefined,
      joinedAt: 0,
      batch: undefined,
      index: -1,
      resolveStarted,
      resolveOutcome,
    };
    this.#validating += 1;
    this.#validate(member).catch((err: unknown) => {
      request.log.error({ err }, "admitting this job to a batch failed");
      this.#end(member, this.#failure(err instanceof Error ? err : new Error(String(err))));
    });
    return {
      started,
      outcome,
      abort: (reason) => this.#abort(member, reason),
      // A job is let go at once when aborted; only a whole batch is hard-stopped (see #abort).
      hardStop: async () => true,
    };
  }

  /** Validates a job's input alone: a bad one fails at once and takes no seat in a batch. */
  async #validate(member: Member): Promise<void> {
    let parsed: Awaited<ReturnType<typeof parseInput>>;
    try {
      parsed = await parseInput(this.#options.definition.input, member.request.job.input);
    } finally {
      // Even when parsing rejects (the caller's catch fails the job): a seat counted as
      // validating for ever would shrink the worker's room for the rest of its life.
      this.#validating -= 1;
    }
    if (!member.phase.is("validating")) return this.#roomChanged();
    if (!parsed.ok) {
      const { refreshWorker } = this.#options.definition;
      this.#end(member, {
        result: {
          kind: "error",
          message: parsed.message,
          code: "RUNLET_INPUT_INVALID",
          stopPod: refreshWorker,
        },
        metrics: {},
      });
      return this.#roomChanged();
    }
    member.parsed = parsed;
    member.phase.to("waiting");
    member.joinedAt = this.#options.clock.now();
    this.#pending.push(member);
    if (this.#pending.length === 1) this.#openWindow();
    this.#maybeLaunch();
  }

  #openWindow(): void {
    this.#windowClosed = false;
    this.#window = this.#options.clock.setTimeout(() => {
      this.#window = undefined;
      this.#windowClosed = true;
      this.#maybeLaunch();
    }, this.#maxWaitMs);
  }

  #closeWindow(): void {
    if (this.#window !== undefined) this.#options.clock.clearTimeout(this.#window);
    this.#window = undefined;
    this.#windowClosed = false;
  }

  #maybeLaunch(): void {
    while (
      this.#pending.length > 0 &&
      (this.#pending.length >= this.#maxSize || this.#windowClosed) &&
      this.#running.size < this.#concurrency
    ) {
      const members = this.#pending.splice(0, this.#maxSize);
      if (this.#pending.length === 0) this.#closeWindow();
      this.#launch(members);
    }
  }

  #launch(members: Member[]): void {
    this.#batches += 1;
    const id = `${this.#idPrefix}-${this.#batches}`;
    const log = this.#options.log.child({ batchId: id });
    const batch: Batch = {
      id,
      members,
      startedAt: this.#options.clock.now(),
      run: undefined,
      wanted: members.length,
      hardStopTimer: undefined,
    };
    for (const [index, member] of members.entries()) {
      member.phase.to("running");
      member.batch = batch;
      member.index = index;
    }
    this.#running.add(batch);
    log.debug({ size: members.length, jobIds: members.map((m) => m.request.job.id) }, "running a batch");
    // Before runBatch: an in-process batch's handler may block the thread from its first line.
    for (const member of members) member.request.onLaunch(Date.now());
    const run = this.#runBatch({
      batchId: id,
      log,
      members: members.map((member) => ({
        job: member.request.job,
        parsed: member.parsed as ParsedInput,
        timeoutMs: member.request.timeoutMs,
        log: member.request.log,
        progress: (json: string) => member.hooks.progress(json),
      })),
    });
    batch.run = run;
    void run.started.then((at) => {
      for (const member of members) member.resolveStarted(at);
    });
    run.outcomes
      .then((outcomes) => {
        for (const [index, member] of members.entries()) {
          const outcome = outcomes === "killed" ? "killed" : outcomes[index];
          if (member.phase.is("running") && outcome !== undefined)
            this.#end(member, this.#withBatch(member, outcome));
        }
      })
      .catch((err: unknown) => log.error({ err }, "settling a batch's jobs failed"))
      .finally(() => {
        this.#running.delete(batch);
        if (batch.hardStopTimer !== undefined) this.#options.clock.clearTimeout(batch.hardStopTimer);
        this.#maybeLaunch();
        this.#roomChanged();
      });
    // The filling batch is empty again: the take loop may ask for a whole batch.
    this.#roomChanged();
  }

  /** Runs a batch on the runner, through telemetry's seam when there is one. */
  #runBatch(request: BatchRunRequest): BatchRun {
    const run = (r: BatchRunRequest) => this.#options.runner.runBatch(r);
    return this.#options.wrapBatch === undefined ? run(request) : this.#options.wrapBatch(request, run);
  }

  #withBatch(member: Member, outcome: ExecuteOutcome | "killed"): ExecuteOutcome | "killed" {
    const batch = member.batch;
    if (outcome === "killed" || batch === undefined) return outcome;
    return {
      ...outcome,
      batch: { id: batch.id, size: batch.members.length, waitMs: batch.startedAt - member.joinedAt },
    };
  }

  /** A job is let go (job-stop, its deadline, shutdown): it leaves its batch, which runs on for the others. */
  #abort(member: Member, reason: Error): void {
    const phase = member.phase.state;
    if (phase === "ended") return;
    if (phase === "waiting") {
      const at = this.#pending.indexOf(member);
      if (at >= 0) this.#pending.splice(at, 1);
      if (this.#pending.length === 0) this.#closeWindow();
    }
    const batch = member.batch;
    if (phase === "running" && batch !== undefined) {
      batch.run?.abortJob(member.index, reason);
      batch.wanted -= 1;
      if (batch.wanted === 0) this.#letGo(batch, reason);
    }
    this.#end(member, this.#withBatch(member, this.#failure(reason)));
    this.#roomChanged();
  }

  /** No job of `batch` is still wanted: fire its signal, and hard-stop it if it runs on past the grace. */
  #letGo(batch: Batch, reason: Error): void {
    const { definition, clock, log, runaway } = this.#options;
    batch.run?.abortBatch(reason);
    batch.hardStopTimer = armHardStop({
      clock,
      graceMs: definition.hardStopGraceMs,
      log,
      message: "the batch handler ignored its aborted signal; hard-stopping the batch",
      fields: { batchId: batch.id },
      stillRuns: () => this.#running.has(batch),
      stop: () => batch.run?.hardStop() ?? Promise.resolve(false),
      // In-process nothing can end the call: the worker stops so the platform replaces it.
      ranAway: () => runaway(batch.members[0]?.request.job.id ?? batch.id),
    });
  }

  #failure(reason: Error): ExecuteOutcome {
    const code = isRunletError(reason) ? reason.code : "RUNLET_JOB_STOPPED";
    const stopPod = this.#options.definition.refreshWorker;
    return { result: { kind: "error", message: reason.message, code, stopPod }, metrics: {} };
  }

  #end(member: Member, outcome: ExecuteOutcome | "killed"): void {
    if (!member.phase.move("ended")) return;
    // Epoch ms, as a runner's start: a job's deadline is computed from it (active-job.ts).
    member.resolveStarted(Date.now());
    member.resolveOutcome(outcome);
  }

  #roomChanged(): void {
    this.#options.roomChanged();
  }
}
