import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";

/** What {@link armHardStop} stops, and what it tells when it cannot. */
export interface HardStopTarget {
  readonly clock: Clock;
  /** The handler's `hardStopGraceMs`. */
  readonly graceMs: number;
  readonly log: Logger;
  /** The error line logged when the grace runs out, with its fields. */
  readonly message: string;
  readonly fields: Record<string, unknown>;
  /** Whether the handler still runs once the grace is over (else nothing happens). */
  stillRuns(): boolean;
  /** Ends it by force; false when its runner cannot (in-process). */
  stop(): Promise<boolean>;
  /** It could not be stopped: the worker must be replaced (the runaway fact). */
  ranAway(): void;
}

/**
 * The hard stop, the one place for a single job (active-job.ts) and a batch (batch-scheduler.ts):
 * `graceMs` after an abort, a handler that still runs is stopped by force, or, where nothing can
 * stop it (in-process), reported as a runaway. Returns the timer (cleared when the run ends).
 */
export function armHardStop(target: HardStopTarget): ClockTimer {
  const { clock, graceMs, log } = target;
  return clock.setTimeout(() => {
    if (!target.stillRuns()) return;
    log.error({ ...target.fields, graceMs }, target.message);
    // Called inside then(): a stop that throws is logged like one that rejects.
    Promise.resolve()
      .then(() => target.stop())
      .then((stopped) => {
        // Stopped: the runner's outcome ("killed") settles the run.
        if (!stopped) target.ranAway();
      })
      .catch((err: unknown) => log.error({ err }, "hard-stopping the handler failed"));
  }, graceMs);
}
