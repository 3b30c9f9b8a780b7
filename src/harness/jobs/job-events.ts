import type { StreamChunk } from "../../protocol/worker-bodies.js";
import type { JobSnapshot } from "./job-entry.js";

/**
 * Something that happened to a job, as {@link Harness.onJobEvent} reports it: a progress update or
 * a stream chunk from its worker (in arrival order), or its end (any terminal state, whoever
 * caused it: the worker's result, a cancel, the execution timeout, a second heartbeat lapse).
 */
export type JobEvent =
  | {
      readonly type: "progress";
      readonly jobId: string;
      readonly endpointId: string;
      /** The update's `output`. */
      readonly output: unknown;
    }
  | {
      readonly type: "stream";
      readonly jobId: string;
      readonly endpointId: string;
      /** 1 for the job's first chunk (a retried job starts again at 1). */
      readonly index: number;
      readonly chunk: StreamChunk;
    }
  | {
      readonly type: "end";
      readonly jobId: string;
      readonly endpointId: string;
      /** The job as it ended: status, output or error, timings. */
      readonly job: JobSnapshot;
    };

/** Receives job events; it runs inside the harness's request handling, so it must return quickly. */
export type JobEventListener = (event: JobEvent) => void;

/** The listeners of one harness. A listener that throws is reported to `onError` and kept. */
export class JobEventHub {
  readonly #listeners = new Set<JobEventListener>();
  readonly #onError: (err: unknown) => void;

  constructor(onError: (err: unknown) => void) {
    this.#onError = onError;
  }

  /** Adds a listener; the returned function removes it. */
  subscribe(listener: JobEventListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** True when someone listens (so the caller can skip building an event nobody reads). */
  get active(): boolean {
    return this.#listeners.size > 0;
  }

  emit(event: JobEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        // A listener's bug must not break the job it was told about.
        this.#onError(err);
      }
    }
  }

  /** Drops every listener (on close). */
  clear(): void {
    this.#listeners.clear();
  }
}
