import type { Logger } from "pino";
import type { ExecuteOutcome } from "../../handler/execute.js";
import type { StreamChunk } from "../../protocol/index.js";
import { createReassembler } from "../../stream/index.js";
import type { WorkerEventHub } from "../events.js";
import { nextConcurrency } from "../job/concurrency.js";
import { timeoutMessage } from "../job/job-deadline.js";
import type { Scheduler } from "../job/scheduler.js";

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
  /** Epoch ms at which the handler started. */
  readonly started: Promise<number>;
  /** How it ended; never rejects. */
  readonly ended: Promise<RunEnding>;
  /** Fires the handler's signal with `reason` (nothing once it ended). */
  abort(reason: Error): void;
  /** Ends the handler by force where its runner can (an isolation thread); false in-process. */
  hardStop(): Promise<boolean>;
}

/** What {@link startJobRun} needs besides the request. */
export interface JobRunParts {
  readonly scheduler: Scheduler;
  readonly events: WorkerEventHub;
}

/** Starts `input` as job `id` with `timeoutMs`; what it yields goes to `sink`. */
export function startJobRun(
  parts: JobRunParts,
  request: { readonly id: string; readonly input: unknown; readonly timeoutMs: number; readonly log: Logger },
  sink: RunSink,
): JobRun {
  const { scheduler, events } = parts;
  const { id, log } = request;
  const reassembler = createReassembler();
  events.emit("taken", { jobId: id });
  const handle = scheduler.run(
    {
      job: { id, input: request.input ?? null },
      timeoutMs: request.timeoutMs,
      log,
      onLaunch: () => events.emit("started", { jobId: id }),
    },
    {
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
    },
  );
  const ended = handle.outcome.then(
    (outcome): RunEnding => {
      if (outcome === "killed") return { kind: "killed" };
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
          outcome.unfit === undefined
            ? undefined
            : { check: outcome.unfit.check, reason: outcome.unfit.reason },
      };
    },
    (err: unknown): RunEnding => ({
      kind: "error",
      message: `the worker failed while running this request: ${err instanceof Error ? err.message : String(err)}`,
      code: "RUNLET_JOB_FAILED",
      stopPod: false,
      metrics: {},
    }),
  );
  return {
    started: handle.started,
    ended,
    abort: (reason) => handle.abort(reason),
    hardStop: () => handle.hardStop(),
  };
}

/** The handler's concurrency from now on (a function's answer checked, as the queue's take loop does). */
export const consultConcurrency: typeof nextConcurrency = nextConcurrency;

/** What a request that ran out of time fails with, as a queued job's timeout says it. */
export const deadlineMessage: (timeoutMs: number) => string = timeoutMessage;
