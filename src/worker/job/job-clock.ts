import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import { MAX_TIMER_MS } from "../../duration.js";
import type { DeliveredJob } from "../../protocol/index.js";
import { settle } from "../../task-sink.js";
import type { HeartbeatSlot } from "../platform/heartbeat.js";

/**
 * A job's time, in one place: its limit (`policy.executionTimeout`, else the handler's), its
 * deadline from the handler's start, the grace after an abort and the hard stop that follows it,
 * and the in-process watchdog's deadline on the heartbeat thread. ActiveJob (active-job.ts) owns
 * one {@link JobClock}; a batch's seat (batch-scheduler.ts) uses {@link armHardStop} for the run
 * it holds once no job of it is still wanted.
 */

/** The watchdog fires this long after the main thread's own hard stop, so it acts only when the main thread is stuck. */
export const WATCHDOG_SLACK_MS = 1_000;

/**
 * A job's time limit: a positive integer `policy.executionTimeout`, else the handler's. One past
 * the longest timer (the platform's own limit is 7 days) is held to it: a longer timer fires at once.
 */
export function jobTimeoutMs(job: DeliveredJob, fallbackMs: number): number {
  const policy = job.policy;
  if (typeof policy === "object" && policy !== null) {
    const value = (policy as { executionTimeout?: unknown }).executionTimeout;
    if (typeof value === "number" && Number.isSafeInteger(value) && value > 0)
      return Math.min(value, MAX_TIMER_MS);
  }
  return fallbackMs;
}

/**
 * The error of a job that ran out of time. A string for the watchdog's template (heartbeat.ts's
 * WATCH_TIMEOUT_MARK), which puts the number in on the heartbeat thread.
 */
export function timeoutMessage(timeoutMs: number | string): string {
  return `job timed out after ${timeoutMs} ms (executionTimeout)`;
}

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
 * The hard stop, the one place for a job's run and a batch's: `graceMs` after an abort, a handler
 * that still runs is stopped by force, or, where nothing can stop it (in-process), reported as a
 * runaway. Returns the timer (cleared when the run ends).
 */
export function armHardStop(target: HardStopTarget): ClockTimer {
  const { clock, graceMs, log } = target;
  return clock.setTimeout(() => {
    if (!target.stillRuns()) return;
    log.error({ ...target.fields, graceMs }, target.message);
    // Called inside then(): a stop that throws is logged like one that rejects.
    settle(
      Promise.resolve()
        .then(() => target.stop())
        .then((stopped) => {
          // Stopped: the runner's outcome ("killed") settles the run.
          if (!stopped) target.ranAway();
        }),
      (err) => log.error({ err }, "hard-stopping the handler failed"),
    );
  }, graceMs);
}

/** What one job's clock is made with. */
export interface JobClockOptions {
  readonly clock: Clock;
  readonly timeoutMs: number;
  /** The handler's `hardStopGraceMs`. */
  readonly graceMs: number;
  /** The job's heartbeat slot when the watchdog guards it (in-process with `exitOnHardStop`); else undefined. */
  readonly watchdog: HeartbeatSlot | undefined;
}

/** One job's timers and its watchdog, cleared together. */
export class JobClock {
  readonly timeoutMs: number;
  readonly #options: JobClockOptions;
  #timers: ClockTimer[] = [];
  /** The deadline the watchdog is armed for (epoch ms, real time: the thread reads Date.now()); 0 when unarmed. */
  #watched = 0;

  constructor(options: JobClockOptions) {
    this.#options = options;
    this.timeoutMs = options.timeoutMs;
  }

  /** Arms the deadline of a handler that started at `startedAt` (epoch ms); `onDeadline` runs then. */
  startDeadline(startedAt: number, onDeadline: () => void): number {
    const deadline = startedAt + this.timeoutMs;
    this.#timers.push(this.#options.clock.setTimeout(onDeadline, Math.max(0, deadline - Date.now())));
    return deadline;
  }

  /** Arms (or re-arms) the watchdog for a deadline at `deadline` (epoch ms); nothing without one. */
  watch(deadline: number, streaming: boolean): void {
    const { watchdog, graceMs } = this.#options;
    if (watchdog === undefined) return;
    this.#watched = deadline;
    watchdog.watch(deadline + graceMs + WATCHDOG_SLACK_MS, this.timeoutMs, streaming);
  }

  /** The job turned out to stream: a watchdog armed before must post its failure as a stream's final. */
  rewatch(streaming: boolean): void {
    if (this.#watched !== 0) this.watch(this.#watched, streaming);
  }

  unwatch(): void {
    if (this.#watched === 0) return;
    this.#watched = 0;
    this.#options.watchdog?.unwatch();
  }

  /** After an abort: the grace, then {@link armHardStop} for `target`. */
  graceThen(target: Omit<HardStopTarget, "clock" | "graceMs">): void {
    const { clock, graceMs } = this.#options;
    this.#timers.push(armHardStop({ ...target, clock, graceMs }));
  }

  /** Clears every timer and disarms the watchdog. */
  stop(): void {
    for (const timer of this.#timers) this.#options.clock.clearTimeout(timer);
    this.#timers = [];
    this.unwatch();
  }
}
