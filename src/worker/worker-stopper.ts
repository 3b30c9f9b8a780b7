import type { Logger } from "pino";
import type { Unfitness } from "../handler/unfit.js";
import type { Heartbeat } from "./heartbeat.js";

/**
 * Why a worker stops, and the start of its stop: the first SIGTERM/SIGINT, a result asking for
 * the worker to be replaced (`stopPod`), an in-process handler that ignored its signal, and
 * unfitness (a failed health check, a `WorkerUnfitError`, a handler that does not load in an
 * isolation thread) all come here; each records its reason and exit code, then closes the worker.
 */

/** Why and how a worker stopped. */
export interface WorkerStopInfo {
  /**
   * `closed`: close() was called; `signal`: SIGTERM/SIGINT; `runaway`: an in-process handler ignored
   * its deadline; `unhealthy`: a health check failed or code reported the worker unfit (docs/protocol.md, "Unfit workers");
   * `refresh`: a job's result asked the platform to replace the worker (`stopPod`, from
   * `refreshWorker`), so the worker stopped taking jobs after it.
   */
  readonly reason: "closed" | "signal" | "runaway" | "unhealthy" | "refresh";
  /**
   * The exit code the process should end with: 0 (also after a requested refresh, which is no
   * failure), or 1 after a runaway handler, unfitness, or a job result the worker gave up on
   * (so the platform's restart policy and the logs agree that something was lost).
   */
  readonly exitCode: number;
}

/** What the stopper acts on, all owned by the worker. */
export interface WorkerStopperParts {
  readonly log: Logger;
  /** The worker's `exitOnHardStop`: a runaway handler ends the process once the worker has closed. */
  readonly exitOnHardStop: boolean;
  /** Sends the unhealthy ping (none without a heartbeat thread). */
  readonly heartbeat: Heartbeat | undefined;
  /** Aborted to stop taking jobs; aborted already once close() has been called. */
  readonly closing: AbortController;
  /**
   * The worker's close(). Passed in rather than reached through an import because worker.ts builds
   * the stopper: importing Worker here would be an import cycle.
   */
  readonly close: () => Promise<void>;
}

/** The one place a worker decides to stop for a reason of its own (see the file's summary). */
export class WorkerStopper {
  readonly #parts: WorkerStopperParts;
  #info: WorkerStopInfo = { reason: "closed", exitCode: 0 };
  #unfit: Unfitness | undefined;
  #unhealthyPing: Promise<void> | undefined;
  /** Jobs whose result the worker gave up posting. */
  #lost = 0;

  constructor(parts: WorkerStopperParts) {
    this.#parts = parts;
  }

  /** Why the worker stops (or stopped), and its exit code; `closed` until another reason comes. */
  get info(): WorkerStopInfo {
    return this.#lost > 0 && this.#info.exitCode === 0 ? { ...this.#info, exitCode: 1 } : this.#info;
  }

  /** The worker gave up posting a job's result (it is lost to the platform): the exit code becomes 1. */
  lost(jobId: string): void {
    this.#lost += 1;
    this.#parts.log.error(
      { code: "RUNLET_REPORT_GAVE_UP", jobId, lost: this.#lost },
      "a job's result was not delivered; the worker will exit with code 1",
    );
  }

  /** The unhealthy ping in flight, if the worker was declared unfit: the heartbeat thread must outlive it. */
  get unhealthyPing(): Promise<void> | undefined {
    return this.#unhealthyPing;
  }

  /** The first SIGTERM/SIGINT: closes the worker; resolves with the exit code the process ends with. */
  async signal(): Promise<number> {
    if (this.#info.reason === "closed") this.#info = { reason: "signal", exitCode: 0 };
    await this.#parts.close();
    return this.#info.exitCode;
  }

  /**
   * A result with `stopPod` is queued: the platform replaces this worker after it, so the worker
   * takes nothing more; other running jobs finish (up to the grace) and report, then it stops.
   * Unfitness or a runaway handler keep their own reason and exit code 1.
   */
  refresh(jobId: string): void {
    // Closing already (close() aborts `closing` at once) or unfit: nothing to add.
    if (this.#parts.closing.signal.aborted || this.#unfit !== undefined) return;
    this.#parts.log.info(
      { jobId },
      "a result asked the platform to replace this worker (stopPod); taking no more jobs, finishing the running ones, then stopping",
    );
    if (this.#info.reason === "closed") this.#info = { reason: "refresh", exitCode: 0 };
    void this.#parts.close();
  }

  /** An in-process handler ignored its aborted signal past the grace: the worker must be replaced. */
  runaway(jobId: string): void {
    const { log, exitOnHardStop, close } = this.#parts;
    log.error(
      { jobId },
      exitOnHardStop
        ? "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and exits so the platform replaces it"
        : "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and stops taking jobs",
    );
    this.#info = { reason: "runaway", exitCode: 1 };
    // The worker ends the process after closing when exitOnHardStop is set (worker.ts, #exitProcess).
    void close();
  }

  /**
   * Declares the worker unfit (docs/protocol.md, "Unfit workers"): stops taking jobs, pings once with
   * `status=unhealthy&check=<check>&reason=<reason>`, then closes the worker. Idempotent: later
   * calls return the same promise as close(). Worker.reportUnfit is this.
   */
  unfit(check: string, reason: string): Promise<void> {
    const { log, heartbeat, closing, close } = this.#parts;
    if (this.#unfit === undefined) {
      this.#unfit = { check, reason };
      log.error(
        { code: "RUNLET_WORKER_UNFIT", check, reason },
        `the worker is unfit (${check}: ${reason}); pinging unhealthy, stopping, exit code 1`,
      );
      if (this.#info.reason !== "runaway") this.#info = { reason: "unhealthy", exitCode: 1 };
      // Stop taking before the ping goes out, so no job arrives at a worker that declared itself
      // unfit. Aborting `closing` also ends the loops' waits on the job board.
      closing.abort();
      this.#unhealthyPing = heartbeat?.unhealthy(check, reason);
    }
    return close();
  }
}
