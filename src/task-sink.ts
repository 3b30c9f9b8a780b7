import type { Logger } from "pino";

/**
 * The owners of the work nobody awaits (bullmq's one sink for floating promises). What uses it
 * today, and nothing else:
 *
 * - The worker's long-running background tasks go through its {@link BackgroundTasks}' `run`:
 *   the take loop, the job-stop poll and the health loop (parts.ts; each part keeps the promise
 *   and awaits it in its stop), and the warm cache's sync when the worker becomes ready. A task's
 *   failure is logged once (`code: RUNLET_TASK_FAILED`, `task: <name>`, the error's message) and
 *   the worker goes on; a task started with `unfit: <check>` makes the worker unfit instead
 *   (docs/protocol.md, "Unfit workers"). A task that keeps failing is logged once, then counted,
 *   so its lines stay bounded.
 * - Every other promise that is not awaited or kept goes to {@link settle}, with the handler of
 *   its rejection: a job's promise (the job board), a run's outcomes (the schedulers, the
 *   threads), a thread's end, and outside the worker the cache's, the sidecars', the harness's and
 *   the CLI's own. test/worker/floating-promises.unit.test.ts finds a `void` of a promise or a
 *   promise left to float anywhere in src/ (less the dashboard's browser code).
 * - A job's own I/O (its posts, its stream, its offload) is owned by the job: ActiveJob's promise
 *   is total, and a failure there becomes the job's error result (active-job.ts).
 *
 * The warm cache, the sidecars and telemetry do not take a sink: each owns its own work (its
 * errors are logged where they happen) and the worker's parts await their stops.
 */

/** How a failed task is treated. */
export interface TaskOptions {
  /**
   * The worker's fitness check this task's failure fails (`status=unhealthy&check=<check>`),
   * where the docs say the failure makes the worker unfit (e.g. the warm cache under `strict`).
   * Absent: the failure is logged, and the worker goes on.
   */
  readonly unfit?: string;
}

/** Where a task's error goes: the shape the worker's parts start background work through. */
export interface TaskSink {
  /**
   * Runs `work` now, under `task`'s name; a throw or rejection goes to this sink. The promise
   * never rejects: keep it and await it to know the task is over.
   */
  run(task: string, work: () => unknown, options?: TaskOptions): Promise<void>;
}

/**
 * Hands `promise` to its owner: `onError` hears its rejection (a throw there is dropped: the
 * owner's own failure has nowhere else to go). Returns nothing, so nothing is left to float.
 *
 * @example
 * settle(thread.terminate(), (err) => log.warn({ err }, "ending the thread failed"));
 */
export function settle(promise: PromiseLike<unknown>, onError: (err: unknown) => void): void {
  Promise.resolve(promise).then(undefined, (err: unknown) => {
    try {
      onError(err);
    } catch {
      // The owner's handler failed too: nothing else can be told, and the process must not end for it.
    }
  });
}

/** One line of an error: its name and message (a task's failure is logged without a stack). */
function errorLine(err: unknown): string {
  if (err instanceof Error) return `${err.name || "Error"}: ${err.message}`;
  return String(err);
}

/** How many failures of one task are logged in full before the rest are only counted. */
const LOGGED_PER_TASK = 1;
/** After the first, one line every this many failures of the same task (with the count). */
const RELOG_EVERY = 1_000;

/** Options of {@link BackgroundTasks}. */
export interface BackgroundTasksOptions {
  readonly log: Logger;
  /** A task started with `unfit` failed: the worker's lifecycle decides what follows. */
  readonly unfit?: (check: string, reason: string) => void;
}

/**
 * The worker's sink for background tasks: logs one line a failure (bounded per task) and goes
 * on, or reports unfitness; tracks what runs so the worker's stop can wait for it.
 */
export class BackgroundTasks implements TaskSink {
  readonly #options: BackgroundTasksOptions;
  readonly #running = new Set<Promise<void>>();
  /** Failures so far, by task name (bounded by the names the code uses). */
  readonly #failures = new Map<string, number>();

  constructor(options: BackgroundTasksOptions) {
    this.#options = options;
  }

  /** Tasks started and not yet over. */
  get running(): number {
    return this.#running.size;
  }

  /** Failures counted so far of `task`. */
  failures(task: string): number {
    return this.#failures.get(task) ?? 0;
  }

  run(task: string, work: () => unknown, options?: TaskOptions): Promise<void> {
    const done: Promise<void> = Promise.resolve()
      .then(work)
      .then(
        () => undefined,
        (err: unknown) => this.#fail(task, err, options),
      )
      .finally(() => this.#running.delete(done));
    this.#running.add(done);
    return done;
  }

  #fail(task: string, err: unknown, options?: TaskOptions): void {
    const count = (this.#failures.get(task) ?? 0) + 1;
    this.#failures.set(task, count);
    const reason = `${task} failed: ${errorLine(err)}`;
    if (options?.unfit !== undefined && this.#options.unfit !== undefined) {
      this.#options.unfit(options.unfit, reason);
      return;
    }
    if (count > LOGGED_PER_TASK && count % RELOG_EVERY !== 0) return;
    try {
      this.#options.log.warn(
        { code: "RUNLET_TASK_FAILED", task, failures: count },
        count === 1
          ? `${reason}; the worker goes on without it`
          : `${reason} (${count} failures so far); the worker goes on without it`,
      );
    } catch {
      // The log itself is what failed (its destination is gone): nothing else can be told.
    }
  }
}
