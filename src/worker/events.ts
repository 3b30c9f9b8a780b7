import type { Logger } from "pino";
import type { StartupPhase } from "./startup-phases.js";

/**
 * Typed lifecycle events of a worker (bullmq's WorkerListener is the model), so users can hook
 * metrics without parsing logs: `worker.on("finished", ({ jobId, executionTimeMs }) => ...)`.
 */
export interface WorkerEvents {
  /** The platform handed this worker a job (before it starts). */
  readonly taken: { readonly jobId: string };
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
  };
  /** The job ended in an error (its handler threw, it timed out, its output was too large, ...). */
  readonly failed: {
    readonly jobId: string;
    readonly executionTimeMs: number;
    /** The handler's own metrics (`ctx.metrics`) up to the failure; empty when it set none. */
    readonly metrics: Readonly<Record<string, number | string>>;
    readonly code: string;
    readonly message: string;
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
   * A start-up phase began or ended (docs/worker.md, "Start-up phases"); `ms` is its length, on
   * its end.
   */
  readonly phase: {
    readonly phase: StartupPhase;
    readonly state: "started" | "done" | "failed";
    readonly ms?: number;
  };
  /** Setup reported how far it got (`progress("weights 40 %")`). */
  readonly setupProgress: { readonly text: string };
  /**
   * Start-up is done, just before the first take: each phase's ms (`runlet`: process start →
   * ready to set up; then `fitness`, `cache`, `sidecar`, `setup` as they ran; `total`: ms
   * from process start).
   */
  readonly ready: { readonly phases: Readonly<Record<string, number>> };
  /** The worker stopped; the same value `worker.stopped` resolves with. */
  readonly stopped: { readonly reason: string; readonly exitCode: number };
}

/** A listener of event `K`. */
export type WorkerListener<K extends keyof WorkerEvents> = (event: WorkerEvents[K]) => void;

/**
 * Holds the listeners and calls them in order. A listener that throws is logged and skipped: a
 * metrics hook can never break a job.
 */
export class WorkerEventHub {
  readonly #listeners = new Map<keyof WorkerEvents, Set<(event: never) => void>>();
  readonly #log: Logger;

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
