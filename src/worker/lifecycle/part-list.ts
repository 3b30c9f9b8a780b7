import type { Logger } from "pino";
import type { StartupPhaseName } from "../events.js";
import type { PartEnd } from "./lifecycle.js";
import type { StartupPhases } from "./startup-phases.js";

/**
 * The worker's long-lived parts, declared once (fastify's avvio, with its close hooks in
 * reverse, is the model): each part is one object with one shape — a name, `start(signal)`,
 * `stop(deadline)` — and the worker composes them as an ordered list (worker-parts.ts,
 * `composeParts`). {@link PartList} starts the list forward until ready and stops it in reverse.
 * Nothing starts in a part's constructor, and a part that is not configured is not in the list,
 * so a stop never asks "is it there?". The start-up phase events and the `worker ready` line
 * come from the same list: a new phase is one entry, and cannot start out of order or stay
 * unstopped.
 */

/** One long-lived part of the worker. */
export interface WorkerPart {
  /** Names it in logs (`part` field) and in docs/architecture.md's list. */
  readonly name: string;
  /**
   * The start-up phase its start is (docs/worker.md, "Start-up phases"): timed, reported with
   * `phase` events and a line, and in `worker ready`'s `phases`. Absent: its start is no phase.
   */
  readonly phase?: StartupPhaseName | undefined;
  /**
   * Starts the part; `signal` aborts when the worker stops meanwhile. Resolves false when the
   * worker cannot serve (the part has already reported why, e.g. as unfit, or the worker is
   * closing): the parts after it do not start. A throw counts as false and is logged.
   */
  start(signal: AbortSignal): Promise<boolean> | boolean;
  /**
   * The lifecycle state the part's stop ends in (lifecycle.ts, `partStopped`): the jobs part's
   * `flushing`, the reports part's `closed`. The part itself never moves the lifecycle.
   */
  readonly endsIn?: PartEnd | undefined;
  /** Every part started: the worker is ready, its first take follows (pings, syncs, loops begin). */
  ready?(): void;
  /**
   * Stops the part by `deadline` (ms on the worker's clock: the end of the shutdown grace), once,
   * in reverse order, after every part started after it has stopped. Called for each part whose
   * start began, so it must stop a half-started part too. A throw is logged; the stop goes on.
   */
  stop(deadline: number): Promise<void> | void;
}

/** The worker's parts in their order, started forward and stopped in reverse. */
export class PartList {
  readonly #parts: readonly WorkerPart[];
  readonly #phases: StartupPhases;
  readonly #log: Logger;
  /** The parts whose start began, in order: those are stopped. */
  readonly #begun: WorkerPart[] = [];
  #stopping: Promise<void> | undefined;

  readonly #stopped: (part: WorkerPart) => void;

  /** @param stopped told after each part's stop (thrown or not): the lifecycle's hook. */
  constructor(
    parts: readonly WorkerPart[],
    phases: StartupPhases,
    log: Logger,
    stopped: (part: WorkerPart) => void = () => undefined,
  ) {
    this.#parts = parts;
    this.#phases = phases;
    this.#log = log;
    this.#stopped = stopped;
  }

  /** The parts' names, in start order. */
  get names(): readonly string[] {
    return this.#parts.map((part) => part.name);
  }

  /**
   * Starts each part in order, each phase through {@link StartupPhases.run}; once all started,
   * reports ready (the `ready` event and the `worker ready` line) and calls each part's `ready`.
   * Resolves true when ready; false when a part failed or `signal` aborted (nothing after it started).
   */
  async start(signal: AbortSignal): Promise<boolean> {
    for (const part of this.#parts) {
      if (signal.aborted || this.#stopping !== undefined) return false;
      this.#begun.push(part);
      const step = () => this.#startOne(part, signal);
      const ok = part.phase === undefined ? await step() : await this.#phases.run(part.phase, step, signal);
      if (!ok) return false;
    }
    if (signal.aborted || this.#stopping !== undefined) return false;
    this.#phases.ready();
    for (const part of this.#parts) {
      try {
        part.ready?.();
      } catch (err) {
        this.#log.error({ err, part: part.name }, `the ${part.name} failed as the worker became ready`);
      }
    }
    return true;
  }

  async #startOne(part: WorkerPart, signal: AbortSignal): Promise<boolean> {
    try {
      return await part.start(signal);
    } catch (err) {
      this.#log.error({ err, part: part.name }, `starting the ${part.name} failed`);
      return false;
    }
  }

  /** Stops every part whose start began, last first, each by `deadline`. Idempotent. */
  stop(deadline: number): Promise<void> {
    this.#stopping ??= (async () => {
      for (const part of [...this.#begun].reverse()) {
        try {
          await part.stop(deadline);
        } catch (err) {
          this.#log.warn({ err, part: part.name }, `stopping the ${part.name} failed`);
        }
        this.#stopped(part);
      }
    })();
    return this.#stopping;
  }
}
