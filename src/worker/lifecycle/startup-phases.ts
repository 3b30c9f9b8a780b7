import type { Logger } from "pino";
import type { StartupPhaseName, WorkerEventHub } from "../events.js";

/**
 * The worker's start-up, phase by phase (docs/worker.md, "Start-up phases"): process start → runlet
 * loaded (the worker built) → fitness → cache → sidecar → setup → the first take. Each phase is
 * one {@link StartupPhases.run} call at its place in Worker's start (worker.ts), which emits the
 * `phase` events and logs a line with a `phase` field; {@link StartupPhases.ready} emits `ready`
 * and logs the one `worker ready` line with every phase's ms, just before the first take.
 */

/**
 * ms since the process started. `process.uptime()` rather than `performance.now()`: the same
 * origin, but the first touch of `performance` loads node:perf_hooks, about 5 ms of CPU inside
 * runlet's own phase under the image's flags (docs/benchmarks.md).
 */
const sinceProcessStart = (): number => process.uptime() * 1000;

const round = (ms: number): number => Math.round(ms * 10) / 10;

/**
 * CPU time the process has used so far (every thread), ms. On a machine shared with other work a
 * phase's wall time measures the machine more than runlet; its CPU time stays close to what the
 * phase costs (`npm run bench` reports both).
 */
const processCpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Records the start-up phases of one worker and reports them. */
export class StartupPhases {
  readonly #events: WorkerEventHub;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #phases: Record<string, number> = {};
  /** CPU ms used from process start to the end of runlet's own phase, then to ready. */
  readonly #cpuMs: Record<string, number> = {};
  readonly #cpu: () => number;
  #ready = false;

  /** `now`: ms since the process started; `cpu`: CPU ms the process used so far (tests give their own). */
  constructor(
    events: WorkerEventHub,
    log: Logger,
    now: () => number = sinceProcessStart,
    cpu: () => number = processCpuMs,
  ) {
    this.#events = events;
    this.#log = log;
    this.#now = now;
    this.#cpu = cpu;
    // Process start → runlet loaded and the worker built.
    this.#phases["runlet"] = round(now());
    this.#cpuMs["runlet"] = round(cpu());
  }

  /** The phases recorded so far (ms each), by name. */
  get phases(): Readonly<Record<string, number>> {
    return { ...this.#phases };
  }

  /**
   * Runs one phase: `step` resolves true when it passed, false when it failed (it has already
   * reported why, e.g. through the worker's unfit path). A throw counts as failed and is rethrown.
   * When `signal` (the worker's start) aborted while the phase ran, the phase was cut, whatever
   * `step` said (a check cut short passes nothing): its line says so, with `phaseState: "failed"`
   * and `cut: true`, and the phase counts as failed.
   */
  async run(phase: StartupPhaseName, step: () => Promise<boolean>, signal?: AbortSignal): Promise<boolean> {
    const started = this.#now();
    this.#events.emit("phase", { phase, state: "started" });
    this.#log.info({ phase, phaseState: "started" }, `start-up: ${phase}…`);
    let ok = false;
    let cut = false;
    try {
      ok = await step();
      cut = signal?.aborted === true;
      return ok && !cut;
    } finally {
      const ms = round(this.#now() - started);
      this.#phases[phase] = ms;
      const state = ok && !cut ? "done" : "failed";
      this.#events.emit("phase", { phase, state, ms });
      const line = { phase, phaseState: state, ms };
      if (cut)
        this.#log.info(
          { ...line, cut: true },
          `start-up: ${phase} cut after ${ms} ms: the worker is stopping`,
        );
      else if (ok) this.#log.info(line, `start-up: ${phase} done in ${ms} ms`);
      else this.#log.warn(line, `start-up: ${phase} failed after ${ms} ms`);
    }
  }

  /**
   * Start-up is done: emits `ready` and logs `worker ready` with the phases (once), and `cpuMs`:
   * the CPU time the process used up to the end of runlet's phase (`runlet`) and up to ready (`total`).
   */
  ready(): Readonly<Record<string, number>> {
    if (!this.#ready) {
      this.#ready = true;
      this.#phases["total"] = round(this.#now());
      this.#cpuMs["total"] = round(this.#cpu());
      const phases = this.phases;
      this.#log.info({ phases, cpuMs: { ...this.#cpuMs } }, "worker ready");
      this.#events.emit("ready", { phases });
    }
    return this.phases;
  }
}
