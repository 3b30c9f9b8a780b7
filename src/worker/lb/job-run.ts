import type { Logger } from "pino";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { ExecuteHooks, ExecuteOutcome } from "../../handler/execute.js";
import { type ParsedInput, parseInput } from "../../handler/parse-input.js";
import type { DeliveredJob, StreamChunk } from "../../protocol/index.js";
import { createReassembler } from "../../stream/index.js";
import { settle } from "../../task-sink.js";
import type { WorkerEventHub } from "../events.js";
import { nextConcurrency } from "../job/concurrency.js";
import { timeoutMessage } from "../job/job-clock.js";
import type { Launch, ScheduledJob, Scheduler } from "../job/scheduler.js";
import type { RunJob } from "../runner/run.js";

/**
 * The load-balancing server's one coupling to the worker's job path (decision 24: how a job
 * arrives is a part of its own; what runs it is shared): a request becomes a job handed to the
 * worker's scheduler, which runs it on the runner (in-process or an isolation thread) with the
 * same validation, context, telemetry wrapper and stream splitting as a queued job. Only this
 * file names the scheduler's and runner's types, so a change to them is re-pointed here.
 */

/** What a request's run hands back as the handler makes it. */
export interface RunSink {
  /** The handler returned a generator: the answer is a stream (called before its first item). */
  streaming(): void;
  /** An item the handler yielded, whole again; the next is made once this resolves (back-pressure). */
  item(value: unknown): Promise<void>;
}

/** A run's end: its result, the handler's metrics, and whether it asks for the worker to go. */
export type RunEnding =
  | {
      readonly kind: "output";
      readonly json: string;
      readonly stopPod: boolean;
      readonly metrics: ExecuteOutcome["metrics"];
    }
  | {
      readonly kind: "error";
      readonly message: string;
      readonly code: string;
      readonly stopPod: boolean;
      readonly metrics: ExecuteOutcome["metrics"];
      /** The handler threw a WorkerUnfitError: the worker is unfit. */
      readonly unfit?: { readonly check: string; readonly reason: string } | undefined;
    }
  | { readonly kind: "killed" };

/** One request's job on the worker's job path. */
export interface JobRun {
  /** Epoch ms at which the handler started; never settles for a job that ended before its run started (race it against {@link ended}). */
  readonly started: Promise<number>;
  /** How it ended; never rejects. */
  readonly ended: Promise<RunEnding>;
  /**
   * Fires the handler's signal with `reason`; the first call wins, later ones do nothing (nor any
   * once it ended). A job not launched yet leaves its scheduler and ends at once; one let go from
   * its batch ends at once too, while the batch runs on for the others.
   */
  abort(reason: Error): void;
  /** True once the job runs as a run of its own (a plain handler's): only such a run is hard-stopped per request. */
  readonly ownRun: boolean;
  /** Ends the handler by force where its runner can (an isolation thread); false in-process. */
  hardStop(): Promise<boolean>;
}

/** What {@link startJobRun} needs besides the request. */
export interface JobRunDeps {
  readonly definition: HandlerDefinition;
  readonly scheduler: Scheduler;
  readonly events: WorkerEventHub;
}

/** Starts `input` as job `id` with `timeoutMs`; what it yields goes to `sink`. */
export function startJobRun(
  deps: JobRunDeps,
  request: { readonly id: string; readonly input: unknown; readonly timeoutMs: number; readonly log: Logger },
  sink: RunSink,
): JobRun {
  const job = new RequestJob(deps, request, sink);
  deps.events.emit("taken", { jobId: request.id });
  deps.scheduler.admit(job);
  return job;
}

/**
 * A request's job as the scheduler sees it (a {@link ScheduledJob}): a plain handler's runs at
 * once, a run of one; a batch handler's validates alone, waits for its seat and runs in a batch,
 * as a queued job does. Its own state is only what the answer needs: the launch, the end.
 */
class RequestJob implements ScheduledJob, JobRun {
  readonly id: string;
  readonly started: Promise<number>;
  readonly ended: Promise<RunEnding>;
  readonly #deps: JobRunDeps;
  readonly #input: DeliveredJob["input"];
  readonly #timeoutMs: number;
  readonly #log: Logger;
  readonly #hooks: ExecuteHooks;
  #parsed: ParsedInput | undefined;
  #launch: Launch | undefined;
  #startedWith!: (at: number) => void;
  #endWith!: (ending: RunEnding) => void;
  #over = false;
  /** abort() was called: a later call does nothing (a batch seat is let go once). */
  #aborted = false;

  constructor(
    deps: JobRunDeps,
    request: {
      readonly id: string;
      readonly input: unknown;
      readonly timeoutMs: number;
      readonly log: Logger;
    },
    sink: RunSink,
  ) {
    const { events } = deps;
    const { id, log } = request;
    this.id = id;
    this.#deps = deps;
    this.#input = (request.input ?? null) as DeliveredJob["input"];
    this.started = new Promise((resolve) => {
      this.#startedWith = resolve;
    });
    this.ended = new Promise((resolve) => {
      this.#endWith = resolve;
    });
    const reassembler = createReassembler();
    const hooks: ExecuteHooks = {
      progress: (json) => events.emit("progress", { jobId: id, body: json }),
      chunks: async (bodies) => {
        for (const body of bodies) {
          const text = typeof body === "string" ? body : Buffer.from(body).toString("utf8");
          for (const value of reassembler.push(JSON.parse(text) as StreamChunk)) await sink.item(value);
        }
      },
      streaming: () => sink.streaming(),
      validated: (ok, startedAt) => events.emit("validated", { jobId: id, ok, startedAt }),
      wrapHandler: (handlerLog, run) => events.wrapHandler(id, handlerLog, run),
    };
    this.#timeoutMs = request.timeoutMs;
    this.#log = log;
    this.#hooks = hooks;
  }

  /** What the runner runs of this request (read when its run starts, after a batch's validation). */
  get runJob(): RunJob {
    const { id } = this;
    return {
      job: { id, input: this.#input },
      timeoutMs: this.#timeoutMs,
      log: this.#log,
      parsed: this.#parsed,
      hooks: this.#hooks,
      onLaunch: () => this.#deps.events.emit("started", { jobId: id }),
    };
  }

  /** A batch handler's request validates alone before it waits for a seat (a bad one takes none). */
  async prepare(): Promise<boolean> {
    if (this.#over) return false;
    let parsed: ParsedInput;
    try {
      parsed = await parseInput(this.#deps.definition.input, this.#input);
    } catch (err) {
      parsed = {
        ok: false,
        message: `validating the input failed: ${(err as Error)?.message ?? String(err)}`,
      };
    }
    if (this.#over) return false;
    if (!parsed.ok) {
      this.#end({
        kind: "error",
        message: parsed.message,
        code: "RUNLET_INPUT_INVALID",
        stopPod: this.#deps.definition.refreshWorker,
        metrics: {},
      });
      return false;
    }
    this.#parsed = parsed;
    return true;
  }

  launch(launch: Launch): void {
    this.#launch = launch;
    const { run, index } = launch;
    settle(
      run.started.then((at) => this.#startedWith(at)),
      () => undefined,
    );
    settle(
      run.outcomes.then((outcomes) =>
        this.#end(outcomes === "killed" ? { kind: "killed" } : endingOf(outcomes[index])),
      ),
      (err) => this.#end(failedInside(err)),
    );
  }

  get ownRun(): boolean {
    return this.#launch !== undefined && this.#launch.seat === undefined;
  }

  abort(reason: Error): void {
    if (this.#aborted || this.#over) return;
    this.#aborted = true;
    const launch = this.#launch;
    if (launch === undefined) {
      // Still validating or waiting for a batch's seat: it leaves, and ends as its signal would have ended it.
      this.#deps.scheduler.withdraw(this);
      this.#end(abortedWith(reason));
      return;
    }
    if (launch.seat !== undefined) {
      // Let go from its batch (once: a second letGo would fire the batch's signal while others are
      // still wanted): it ends at once, as a queued job let go does; the batch runs on.
      launch.seat.letGo(launch.index, reason);
      this.#end(abortedWith(reason));
      return;
    }
    launch.run.abort(reason, launch.index);
  }

  async hardStop(): Promise<boolean> {
    return this.#launch === undefined ? true : this.#launch.run.hardStop();
  }

  #end(ending: RunEnding): void {
    if (this.#over) return;
    this.#over = true;
    this.#endWith(ending);
  }
}

function endingOf(outcome: ExecuteOutcome | undefined): RunEnding {
  if (outcome === undefined) return failedInside(new Error("the run gave no outcome for this request"));
  const { result, metrics } = outcome;
  if (result.kind === "output")
    return { kind: "output", json: result.json, stopPod: result.stopPod, metrics };
  return {
    kind: "error",
    message: result.message,
    code: result.code,
    stopPod: result.stopPod,
    metrics,
    unfit:
      outcome.unfit === undefined ? undefined : { check: outcome.unfit.check, reason: outcome.unfit.reason },
  };
}

function failedInside(err: unknown): RunEnding {
  return {
    kind: "error",
    message: `the worker failed while running this request: ${err instanceof Error ? err.message : String(err)}`,
    code: "RUNLET_JOB_FAILED",
    stopPod: false,
    metrics: {},
  };
}

function abortedWith(reason: Error): RunEnding {
  return { kind: "error", message: reason.message, code: codeOf(reason), stopPod: false, metrics: {} };
}

function codeOf(err: Error): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : "RUNLET_JOB_FAILED";
}

/** The handler's concurrency from now on (a function's answer checked, as the queue's take loop does). */
export const consultConcurrency: typeof nextConcurrency = nextConcurrency;

/** What a request that ran out of time fails with, as a queued job's timeout says it. */
export const deadlineMessage: (timeoutMs: number) => string = timeoutMessage;
