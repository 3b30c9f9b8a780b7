import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import type { Unfitness } from "../../handler/unfit.js";
import { redactText } from "../../log/redact-text.js";
import { StateMachine, type Transitions } from "../../state-machine.js";
import { settle } from "../../task-sink.js";
import type { WorkerFacts } from "../facts.js";

/**
 * The worker's own lifecycle: running → draining → flushing → closed. It owns the worker's
 * signals (taking, giving up), and it alone decides to stop and to end the process. Parts only
 * report facts ({@link WorkerFacts}: a job's result lost, a runaway handler, unfitness, a refresh
 * asked for); a signal (the signals part, parts.ts), a crash or close() asks too. The worker's
 * shutdown (worker.ts) starts when {@link WorkerLifecycle.draining} resolves; the lifecycle then
 * moves itself on as the parts stop ({@link WorkerLifecycle.partStopped}: the jobs part's stop
 * ends in `flushing`, the reports part's in `closed`).
 *
 * - `running`: taking jobs.
 * - `draining`: taking nothing more (`taking` aborted); running jobs get the shutdown grace.
 * - `flushing`: the jobs are done or aborted; their reports are posted until `flushTimeoutMs`
 *   on the clock, when `giveUp` aborts. The job-stop poll still runs.
 * - `closed`: nothing is posted (`giveUp` aborted); the worker releases its other parts, then
 *   {@link WorkerLifecycle.ended} ends the process where it owns it.
 */

export type LifecycleState = "running" | "draining" | "flushing" | "closed";

/** The moves each state allows: forward only; closed is the end (a close while running skips the middle). */
const MOVES: Transitions<LifecycleState> = {
  running: ["draining"],
  draining: ["flushing", "closed"],
  flushing: ["closed"],
  closed: [],
};

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

export type { WorkerFacts } from "../facts.js";

/** The state a part's stop ends in, when it moves the lifecycle (part-list.ts, `WorkerPart.endsIn`). */
export type PartEnd = Extract<LifecycleState, "flushing" | "closed">;

/** Options of {@link WorkerLifecycle}. */
export interface LifecycleOptions {
  readonly log: Logger;
  /** The worker's clock: the flush deadline runs on it. */
  readonly clock: Clock;
  /** How long reports may go on posting once the worker is flushing, ms (`flushTimeoutMs`). */
  readonly flushTimeoutMs: number;
  /** `exitOnHardStop`: a runaway handler ends the process once the worker has closed. */
  readonly exitOnHardStop: boolean;
  /** `handleSignals`: the signals part listens to SIGTERM/SIGINT; the process ends after a signal's shutdown. */
  readonly handleSignals: boolean;
  /** Sends the unhealthy ping (none without a heartbeat thread). */
  readonly ping: { unhealthy(check: string, reason: string): Promise<void> } | undefined;
  /** Ends the process. @default {@link endProcess} */
  readonly exit?: (code: number) => void;
  /** The ids of the jobs the worker holds (running or being reported), for the line a foreign exit logs. @default none */
  readonly jobsInFlight?: () => readonly string[];
}

/**
 * Ends the process with `code`: the one place runlet calls process.exit (the lifecycle's
 * decisions, and serveHandler's forced exit through {@link endProcessSoon}).
 */
export function endProcess(code: number): void {
  process.exit(code);
}

/**
 * Ends the process with `code` after `ms` unless it ended on its own. A plain unref'd timer, not
 * the worker's clock: it runs after the worker (and its clock) is gone, and must never be what
 * keeps the process alive.
 */
export function endProcessSoon(code: number, ms: number): void {
  setTimeout(() => endProcess(code), ms).unref();
}

/**
 * After a crash, how long the unhealthy ping (`check=crash`) may take before the process exits
 * anyway, ms of real time: the process's state is not to be trusted, so it ends soon regardless.
 */
export const CRASH_PING_MS = 2_000;

/** The check name of the unhealthy ping after an error escaped every owner. */
export const CRASH_CHECK = "crash";

/** The worker's lifecycle (see the file's summary). */
export class WorkerLifecycle implements WorkerFacts {
  readonly #options: LifecycleOptions;
  readonly #taking = new AbortController();
  readonly #giveUp = new AbortController();
  readonly #state = new StateMachine<LifecycleState>("the worker", MOVES, "running", "RUNLET_WORKER_STATE");
  #info: WorkerStopInfo = { reason: "closed", exitCode: 0 };
  #unfit: Unfitness | undefined;
  #unhealthyPing: Promise<void> | undefined;
  #lost = 0;
  #flushTimer: ClockTimer | undefined;
  #signalled = false;
  #crashed = false;
  /** The lifecycle itself is ending the process (its exit is no foreign one). */
  #exiting = false;
  #startDraining!: () => void;
  /** Resolves when the worker must shut down: the first close, signal, runaway, unfitness or refresh. */
  readonly draining: Promise<void>;

  constructor(options: LifecycleOptions) {
    this.#options = options;
    this.draining = new Promise((resolve) => {
      this.#startDraining = resolve;
    });
  }

  get state(): LifecycleState {
    return this.#state.state;
  }

  /** Aborted once the worker takes nothing more (it leaves `running`): ends the loops and their waits. */
  get taking(): AbortSignal {
    return this.#taking.signal;
  }

  /** Aborted at the flush deadline (or once closed): every report's retrying gives up. */
  get giveUp(): AbortSignal {
    return this.#giveUp.signal;
  }

  /** Why the worker stops (or stopped), and its exit code; `closed` until another reason comes. */
  get info(): WorkerStopInfo {
    return this.#lost > 0 && this.#info.exitCode === 0 ? { ...this.#info, exitCode: 1 } : this.#info;
  }

  /** The unhealthy ping in flight, if the worker was declared unfit: the heartbeat thread must outlive it. */
  get unhealthyPing(): Promise<void> | undefined {
    return this.#unhealthyPing;
  }

  /** close() was called: drain, flush, close. */
  close(): void {
    this.#drain();
  }

  /** The first SIGTERM/SIGINT: as close(), and the process ends once the worker has closed. */
  signal(): void {
    this.#signalled = true;
    if (this.#info.reason === "closed") this.#info = { reason: "signal", exitCode: 0 };
    this.#drain();
  }

  /** A second SIGTERM/SIGINT: the process ends at once with code 1, for an operator who will not wait. */
  exitNow(): void {
    this.#exit(1);
  }

  lost(jobId: string): void {
    this.#lost += 1;
    this.#options.log.error(
      { code: "RUNLET_REPORT_GAVE_UP", jobId, lost: this.#lost },
      "a job's result was not delivered; the worker will exit with code 1",
    );
  }

  refresh(jobId: string): void {
    // Stopping already, or unfit: nothing to add.
    if (!this.#state.is("running") || this.#unfit !== undefined) return;
    this.#options.log.info(
      { jobId },
      "a result asked the platform to replace this worker (stopPod); taking no more jobs, finishing the running ones, then stopping",
    );
    if (this.#info.reason === "closed") this.#info = { reason: "refresh", exitCode: 0 };
    this.#drain();
  }

  runaway(jobId: string): void {
    const { log, exitOnHardStop } = this.#options;
    log.error(
      { jobId },
      exitOnHardStop
        ? "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and exits so the platform replaces it"
        : "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and stops taking jobs",
    );
    this.#info = { reason: "runaway", exitCode: 1 };
    this.#drain();
  }

  unfit(check: string, reason: string): void {
    if (this.#unfit !== undefined) return;
    this.#unfit = { check, reason };
    this.#options.log.error(
      { code: "RUNLET_WORKER_UNFIT", check, reason },
      `the worker is unfit (${check}: ${reason}); pinging unhealthy, stopping, exit code 1`,
    );
    if (this.#info.reason !== "runaway") this.#info = { reason: "unhealthy", exitCode: 1 };
    // Stop taking before the ping goes out, so no job arrives at a worker that declared itself unfit.
    this.#drain();
    // The reason leaves the worker: scrubbed as the log's lines are.
    this.#unhealthyPing = this.#options.ping?.unhealthy(check, redactText(reason, this.#options.log));
  }

  /**
   * The last line: an error escaped every owner (an uncaught exception or unhandled rejection).
   * Logged with its stack (`RUNLET_WORKER_CRASHED`), one unhealthy ping with `check=crash`, and
   * the process exits 1 as soon as the ping is answered, at most {@link CRASH_PING_MS} later: no
   * drain, no teardown (the process's state cannot be trusted). The jobs it held are not
   * reported; the platform sees the worker gone (docs/reliability.md).
   */
  crash(err: unknown, origin: "uncaughtException" | "unhandledRejection"): void {
    if (this.#crashed) return;
    this.#crashed = true;
    const what = err instanceof Error ? `${err.name || "Error"}: ${err.message}` : String(err);
    const reason = `${origin}: ${what}`;
    try {
      this.#options.log.fatal(
        { code: "RUNLET_WORKER_CRASHED", origin, err },
        `an error escaped every owner of the worker's tasks (${reason}); pinging unhealthy (check=crash) and exiting 1`,
      );
    } catch {
      // The log is what failed: the ping and the exit still follow.
    }
    let ping: Promise<void>;
    try {
      ping =
        this.#options.ping?.unhealthy(CRASH_CHECK, redactText(reason, this.#options.log)) ??
        Promise.resolve();
    } catch {
      ping = Promise.resolve();
    }
    // Real time, not the worker's clock: nothing of the worker is trusted now.
    const timer = setTimeout(() => this.#exit(1), CRASH_PING_MS);
    // A failed ping: the timer ends the process.
    settle(
      ping.then(() => {
        clearTimeout(timer);
        this.#exit(1);
      }),
      () => undefined,
    );
  }

  /** running → draining, once: `taking` aborts and the worker's shutdown starts. */
  #drain(): void {
    if (!this.#state.move("draining")) return;
    this.#taking.abort();
    this.#startDraining();
  }

  /**
   * A part stopped: when its stop ends a state of the lifecycle (`endsIn`), the lifecycle moves
   * there. The jobs part's stop ends in `flushing` (the jobs are done or aborted), the reports
   * part's in `closed` (their posts ended or were given up).
   */
  partStopped(part: { readonly endsIn?: PartEnd | undefined }): void {
    if (part.endsIn === "flushing") this.#flushing();
    else if (part.endsIn === "closed") this.#closed();
  }

  /** draining → flushing: the jobs are done or aborted; reports may post until the flush deadline. */
  #flushing(): void {
    if (!this.#state.move("flushing")) return;
    const { clock, flushTimeoutMs } = this.#options;
    this.#flushTimer = clock.setTimeout(() => {
      this.#flushTimer = undefined;
      this.#giveUp.abort();
    }, flushTimeoutMs);
  }

  /** → closed: nothing more is posted. */
  #closed(): void {
    if (this.#state.is("closed")) return;
    this.#drain();
    this.#state.to("closed");
    if (this.#flushTimer !== undefined) this.#options.clock.clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    this.#giveUp.abort();
  }

  /**
   * The worker has released its parts: the lifecycle is closed (already, by the reports part's
   * stop, unless the start was cut short before that part began), and the process ends here when
   * the worker owns it (after a signal's shutdown with `handleSignals`; after a runaway handler
   * with `exitOnHardStop`).
   */
  ended(): void {
    this.#closed();
    const info = this.info;
    if (info.reason === "runaway" && this.#options.exitOnHardStop) this.#exit(1);
    else if (this.#signalled && this.#options.handleSignals) this.#exit(info.exitCode);
  }

  #exit(code: number): void {
    this.#exiting = true;
    (this.#options.exit ?? endProcess)(code);
  }

  /** True once the lifecycle itself is ending the process (an exit then is no foreign one). */
  get exiting(): boolean {
    return this.#exiting;
  }

  /**
   * Someone else ended the process (a handler's `process.exit()`) while the worker ran: one fatal
   * line naming the jobs in flight (their results go unreported; the platform's rule for a lost
   * worker takes them), and a non-zero exit: the code chosen, or 1 for a 0, which would read as a
   * clean stop. Runs inside the process's `exit` event: synchronous, no ping can go out.
   */
  foreignExit(code: number): void {
    let jobs: readonly string[] = [];
    try {
      jobs = this.#options.jobsInFlight?.() ?? [];
    } catch {
      // The board's state is what broke: the line still goes out.
    }
    const exitCode = code === 0 ? 1 : code;
    const held =
      jobs.length === 0
        ? "while no job ran"
        : `while ${jobs.length} job${jobs.length === 1 ? "" : "s"} ran (${jobs.slice(0, 20).join(", ")}${jobs.length > 20 ? ", …" : ""})`;
    try {
      this.#options.log.fatal(
        { code: "RUNLET_WORKER_EXITED", exitCode: code, jobs: jobs.slice(0, 100) },
        `process.exit(${code}) was called ${held}, not by the worker; the process ends with exit code ${exitCode}, its jobs unreported (the platform treats them as a lost worker's): a handler should throw or return instead`,
      );
    } catch {
      // The log is gone too: the exit code still says it.
    }
    process.exitCode = exitCode;
  }
}
