import { pipeline } from "node:stream/promises";
import type { Logger } from "pino";

/**
 * The one owner of the work nobody awaits (bullmq's one sink for floating promises): a cache's
 * sync, a telemetry export, a sidecar's output reader, a log write, a stream pipe. Whoever starts
 * such a task hands it to a {@link TaskSink}, and its error goes there — never to the process.
 *
 * - The worker's {@link BackgroundTasks} logs one line for a task's failure (`code:
 *   RUNLET_TASK_FAILED`, `task: <name>`, the error's message) and goes on; a task started with
 *   `unfit: <check>` makes the worker unfit instead (docs/protocol.md, "Unfit workers"). A task
 *   that keeps failing (a log destination gone) is logged once, then counted, so its lines stay
 *   bounded.
 * - A job's tasks (its transfers, its stream pipes) fail that job with a code: ActiveJob's own
 *   sink (active-job.ts) turns a failure there into the job's error result.
 *
 * What a part needs is only the {@link TaskSink} shape (`run`, `fail`, `pipe`), so src/cache,
 * src/sidecar and src/telemetry take a sink without importing the worker.
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

/** Where a task's error goes: the one shape every part that starts background work takes. */
export interface TaskSink {
  /**
   * Runs `work` now, under `task`'s name; a throw or rejection goes to this sink. The promise
   * never rejects: await it only to know the task is over.
   */
  run(task: string, work: () => unknown, options?: TaskOptions): Promise<void>;
  /**
   * A task's error that arrived as an event (a stream's or a child's `'error'`), not as a
   * rejection: treated as {@link TaskSink.run}'s would be.
   */
  fail(task: string, err: unknown, options?: TaskOptions): void;
  /**
   * `stream.pipeline` of `streams` under `task`'s name: every stream's error ends the pipe and
   * reaches this sink once; the streams are destroyed. Resolves true when the pipe finished,
   * false when it failed. Never rejects.
   */
  pipe(task: string, streams: readonly PipeStream[], options?: TaskOptions): Promise<boolean>;
}

/** A stream `pipeline` takes: a source, transforms, a destination. */
export type PipeStream = NodeJS.ReadableStream | NodeJS.WritableStream | NodeJS.ReadWriteStream;

/** One line of an error: its name and message (a task's failure is logged without a stack). */
export function errorLine(err: unknown): string {
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
        (err: unknown) => this.fail(task, err, options),
      )
      .finally(() => this.#running.delete(done));
    this.#running.add(done);
    return done;
  }

  fail(task: string, err: unknown, options?: TaskOptions): void {
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

  pipe(task: string, streams: readonly PipeStream[], options?: TaskOptions): Promise<boolean> {
    let ok = false;
    return this.run(
      task,
      async () => {
        await (pipeline as (...s: PipeStream[]) => Promise<void>)(...streams);
        ok = true;
      },
      options,
    ).then(() => ok);
  }

  /** Resolves once every task started so far is over (each is bounded by its own owner). */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }
}
