import type { Logger } from "pino";
import type { BatchInfo } from "./handler/execute.js";
import type { Run, RunHandle } from "./handler/execute-run.js";
import type { TraceLink } from "./telemetry/link.js";

/**
 * The worker's event contract (a leaf: it imports nothing of src/worker, so the worker's parts
 * and telemetry, which listens, all import it from here): the events a worker emits, the hub that
 * calls their listeners, and telemetry's two seams (`wrapHandler`, `wrapBatch`).
 */

/** The start-up phases before the first take, in their order (docs/worker.md, "Start-up phases"). */
export type StartupPhaseName = "fitness" | "cache" | "sidecar" | "setup";

/**
 * Typed lifecycle events of a worker (bullmq's WorkerListener is the model), so users can hook
 * metrics without parsing logs: `worker.on("finished", ({ jobId, executionTimeMs }) => ...)`.
 */
export interface WorkerEvents {
  /** The platform handed this worker a job (before it starts). */
  readonly taken: {
    readonly jobId: string;
    /** The job's `traceContext` field as delivered (docs/protocol.md, "Trace context"); unchecked. */
    readonly traceContext?: unknown;
  };
  /** The job's input was checked against the handler's schema, from `startedAt` (epoch ms). */
  readonly validated: { readonly jobId: string; readonly ok: boolean; readonly startedAt: number };
  /** A batched job's batch launched at `at` (epoch ms): its handler runs from then. */
  readonly launched: { readonly jobId: string; readonly at: number };
  /** A stream chunk's post ended: accepted (`ok`) or not; `bytes` is its body's size. */
  readonly chunkPosted: { readonly jobId: string; readonly bytes: number; readonly ok: boolean };
  /** An output too large to post was offloaded to S3 (`ok`), or that failed; from `startedAt`. */
  readonly offloaded: {
    readonly jobId: string;
    readonly bytes: number;
    readonly ok: boolean;
    readonly startedAt: number;
  };
  /** The job's posts ended: its final result `delivered`, `replaced`, `rejected`, `gave-up`, or `discarded` (job-stop). */
  readonly reported: { readonly jobId: string; readonly delivery: string };
  /** The job's handler was started. */
  readonly started: { readonly jobId: string };
  /** The handler reported progress; `body` is the JSON text posted to the platform. */
  readonly progress: { readonly jobId: string; readonly body: string };
  /** The job produced its output (queued for posting). */
  readonly finished: {
    readonly jobId: string;
    readonly executionTimeMs: number;
    /** The handler's own metrics (`ctx.metrics`); empty when it set none. */
    readonly metrics: Readonly<Record<string, number | string>>;
    /** The batch it ran in (a batch handler's job). */
    readonly batch?: BatchInfo | undefined;
  };
  /** The job ended in an error (its handler threw, it timed out, its output was too large, ...). */
  readonly failed: {
    readonly jobId: string;
    readonly executionTimeMs: number;
    /** The handler's own metrics (`ctx.metrics`) up to the failure; empty when it set none. */
    readonly metrics: Readonly<Record<string, number | string>>;
    readonly code: string;
    readonly message: string;
    readonly batch?: BatchInfo | undefined;
  };
  /** A post to the platform (a result, progress, chunks) failed and will be retried after `waitMs`. */
  readonly retrying: {
    readonly jobId: string;
    /** What was being posted: `the result`, `progress`, ... */
    readonly what: string;
    readonly attempt: number;
    readonly waitMs: number;
    /** The HTTP status, when the platform answered. */
    readonly status?: number;
    /** The network error's message, when it did not. */
    readonly error?: string;
  };
  /**
   * A start-up phase began or ended (startup-phases.ts): the fitness checks, the warm cache, the
   * model servers (sidecars), the handler's `setup`. `ms` (on done and failed) is how long it took.
   */
  readonly phase: {
    readonly phase: StartupPhaseName;
    readonly state: "started" | "done" | "failed";
    readonly ms?: number;
  };
  /** setup's `progress(text)` (e.g. `"weights 40 %"`); under threads, the first thread's. */
  readonly setupProgress: { readonly text: string };
  /**
   * Start-up is done and the first job-take follows at once. `phases`: ms each phase took, by
   * name (`runlet`: process start → worker started; then each phase that ran; `total`: process
   * start → now).
   */
  readonly ready: { readonly phases: Readonly<Record<string, number>> };
  /** The worker stopped; the same value `worker.stopped` resolves with. */
  readonly stopped: { readonly reason: string; readonly exitCode: number };
}

/** See {@link WorkerEventHub.wrapHandler}; `run` is called at once, with the link when telemetry is on. */
export type HandlerWrapper = <T>(
  jobId: string,
  log: Logger,
  run: (log: Logger, link?: TraceLink) => Promise<T>,
) => Promise<T>;

/** See {@link WorkerEventHub.wrapBatch}. */
export type BatchWrapper = (run: Run, start: (run: Run) => RunHandle) => RunHandle;

/** A listener of event `K`. */
export type WorkerListener<K extends keyof WorkerEvents> = (event: WorkerEvents[K]) => void;

/**
 * Holds the listeners and calls them in order. A listener that throws is logged and skipped: a
 * metrics hook can never break a job.
 */
export class WorkerEventHub {
  readonly #listeners = new Map<keyof WorkerEvents, Set<(event: never) => void>>();
  readonly #log: Logger;
  /**
   * Runs a job's handler (and the draining of its stream); telemetry (src/telemetry) replaces it to run
   * the handler inside the job's span, with a logger that carries the trace ids. Default: as is.
   */
  wrapHandler: HandlerWrapper = (_jobId, log, run) => run(log);
  /**
   * Launches a batch's run (batch-scheduler.ts); telemetry replaces it to launch it inside the
   * batch's span, with its loggers carrying the trace ids and `run.trace` set. Default: as is.
   */
  wrapBatch: BatchWrapper = (run, start) => start(run);

  constructor(log: Logger) {
    this.#log = log;
  }

  on<K extends keyof WorkerEvents>(event: K, listener: WorkerListener<K>): () => void {
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as (event: never) => void);
    return () => this.off(event, listener);
  }

  off<K extends keyof WorkerEvents>(event: K, listener: WorkerListener<K>): void {
    this.#listeners.get(event)?.delete(listener as (event: never) => void);
  }

  emit<K extends keyof WorkerEvents>(event: K, payload: WorkerEvents[K]): void {
    const set = this.#listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as WorkerListener<K>)(payload);
      } catch (err) {
        this.#log.error({ err, event }, `a "${event}" listener threw; ignored`);
      }
    }
  }
}
