import type { Logger } from "pino";
import type { WorkerEventHub } from "./events.js";

/** The worker's start-up steps before its first take (docs/worker.md, "Start-up phases"). */
export type StartupPhase = "fitness" | "cache" | "sidecar" | "setup";

/** Where a phase is: begun, ended well, or ended in the worker's unfitness. */
export type PhaseState = "started" | "done" | "failed";

/** Rounds ms to a tenth, as logged. */
function tenth(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/**
 * Records the worker's start-up: `runlet` (process start → the worker ready to set up, the
 * time Node and runlet took to load), then each phase as it runs (fitness, cache, sidecar,
 * setup), then `total` at the first take. Each change is a worker event and one log line with
 * `phase` / `setupProgress` / `phases` fields, so a parent reading the worker's stdout (`runlet
 * dev`, the harness's process spawner) can follow it (docs/worker.md, "Start-up phases").
 * Times are ms since the process started (`performance.now()`); a worker started inside a
 * longer-lived process (a test harness) counts that process's own time in `runlet`.
 */
export class StartupPhases {
  readonly #log: Logger;
  readonly #events: WorkerEventHub;
  readonly #now: () => number;
  readonly #phases: Record<string, number> = {};
  readonly #begun = new Map<StartupPhase, number>();

  constructor(log: Logger, events: WorkerEventHub, now: () => number = () => performance.now()) {
    this.#log = log;
    this.#events = events;
    this.#now = now;
  }

  /** runlet is loaded and the worker is about to run its start-up phases. */
  loaded(): void {
    this.#phases["runlet"] ??= tenth(this.#now());
  }

  /** A phase begins. */
  started(phase: StartupPhase): void {
    this.#begun.set(phase, this.#now());
    this.#emit(phase, "started", undefined);
  }

  /** A phase ended: done, or failed (the worker is unfit and takes no job). */
  ended(phase: StartupPhase, state: "done" | "failed"): void {
    const begun = this.#begun.get(phase);
    const ms = begun === undefined ? undefined : tenth(this.#now() - begun);
    if (ms !== undefined && state === "done") this.#phases[phase] = ms;
    this.#emit(phase, state, ms);
  }

  /** A progress text from setup (`progress("weights 40 %")`). */
  progress(text: string): void {
    this.#log.info({ setupProgress: text }, `setup: ${text}`);
    this.#events.emit("setupProgress", { text });
  }

  /** Start-up is done: the first take follows. Logs `worker ready` with every phase's ms. */
  ready(): void {
    this.loaded();
    const phases = { ...this.#phases, total: tenth(this.#now()) };
    this.#log.info({ phases }, "worker ready");
    this.#events.emit("ready", { phases });
  }

  #emit(phase: StartupPhase, state: PhaseState, ms: number | undefined): void {
    this.#log.info(
      { phase, phaseState: state, ...(ms === undefined ? {} : { ms }) },
      `${phase} ${state}${ms === undefined ? "" : ` in ${ms} ms`}`,
    );
    this.#events.emit("phase", { phase, state, ...(ms === undefined ? {} : { ms }) });
  }
}
