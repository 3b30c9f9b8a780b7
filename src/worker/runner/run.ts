/**
 * A run of N ≥ 1 jobs: the only unit a Runner (runner.ts) sees (docs/architecture.md, "A
 * run of N ≥ 1 jobs"). A plain handler's scheduler makes runs of one job; a batch handler's makes
 * a run of each batch, whose jobs share one handler call. A run has one handle: its start, one
 * outcome per job, an abort of one job or of all, a hard stop. The types live beside the one
 * front of the executors (src/handler/execute-run.ts), where telemetry reads them too; this file
 * adds the runners' guard.
 */

import { settle } from "../../task-sink.js";

export type { Run, RunHandle, RunJob } from "../../handler/execute-run.js";

/**
 * Whether a run has ended: the one "do nothing once ended" guard of every runner. A late abort
 * must not fire a signal the handler left behind, and a late hard stop must not end a thread that
 * already serves another run.
 */
export class RunEnd {
  #ended = false;

  /** Ended once `outcome` settles (a run on the main thread). */
  static after(outcome: Promise<unknown>): RunEnd {
    const end = new RunEnd();
    // The outcome's own consumer hears its rejection; here either way only ends the run.
    settle(
      outcome.then(() => end.end()),
      () => end.end(),
    );
    return end;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The run ended (its outcome exists, or its thread is gone). */
  end(): void {
    this.#ended = true;
  }

  /** `act`, made inert once the run has ended. */
  guard<A extends unknown[]>(act: (...args: A) => void): (...args: A) => void {
    return (...args) => {
      if (!this.#ended) act(...args);
    };
  }
}
