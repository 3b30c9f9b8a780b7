import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { realClock } from "../../clock.js";
import { RunletError, type RunletErrorCode } from "../../errors.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { ExecuteOutcome } from "../../handler/execute.js";
import { executeRun } from "../../handler/execute-run.js";
import type { ReportIdentity } from "../../handler/outcome.js";
import { createLogger } from "../../log/index.js";
import type { DeliveredJob } from "../../protocol/index.js";
import { settle } from "../../task-sink.js";
import { type ShippedSpan, type ThreadTrace, tracedLog } from "../../telemetry/link.js";
import { threadTracer } from "../../telemetry/thread.js";
import { type RunnerSettings, s3Options } from "./runner.js";
import { runSetup, runTeardown } from "./setup.js";

/**
 * The isolation thread's side (`isolation: "thread"`): receives jobs from the main thread, runs
 * them with the same executeJob as in-process, and sends progress, chunks and the result back.
 * The main thread does all networking. Contract for bundles: docs/worker.md, "Thread entry".
 */

/** `workerData` of an isolation thread. */
export interface RunnerThreadData {
  readonly runletRole: "runner";
  /** The file the thread imports: this module (sources) or a bundle's own file. */
  readonly entryUrl: string;
  /** Sources only: the handler module whose default export runs; a bundle has it built in. */
  readonly handlerUrl: string | undefined;
  /** File URL of tsx's ESM API, when TypeScript must be loadable in the thread. */
  readonly tsxApiUrl: string | undefined;
  readonly log: { readonly platform: boolean; readonly level: string; readonly secrets: readonly string[] };
  readonly settings: RunnerSettings;
}

/** Main → thread: run a run of N ≥ 1 jobs (run.ts): a plain handler's jobs, or a batch (batch-scheduler.ts). */
export interface RunMessage {
  readonly type: "run";
  readonly runId: number;
  /** A batch's id; undefined for a plain handler's jobs (one call each). */
  readonly batchId: string | undefined;
  readonly jobs: readonly DeliveredJob[];
  /** Each job's time limit, in the order of `jobs`. */
  readonly timeoutsMs: readonly number[];
  /**
   * Telemetry on (src/telemetry/thread.ts): a batch's call runs under `span`, and `jobs` are its
   * jobs' spans; a plain run's job `i` runs under `jobs[i]`.
   */
  readonly trace?: ThreadTrace | undefined;
}

/** Main → thread messages. */
export type ToThread =
  | RunMessage
  /**
   * Aborts run `runId` only (cancellation is keyed by run): a stop or deadline that reaches the
   * thread after that run ended must not touch the next job the thread runs. `index` names one
   * job of the run; without it, the run's own signal fires (a batch's; every job's of a plain run).
   */
  | {
      readonly type: "abort";
      readonly runId: number;
      readonly index?: number;
      readonly code: RunletErrorCode;
      readonly message: string;
    }
  | { readonly type: "credit"; readonly seq: number }
  /** Shutdown: run teardown with setup's state for at most `withinMs`, then answer "torn-down". */
  | { readonly type: "teardown"; readonly withinMs: number };

/** Thread → main messages. */
export type FromThread =
  /**
   * The handler loaded and its setup (if any) finished: the thread serves jobs from now on. An
   * error before this is a load failure.
   */
  | { readonly type: "ready" }
  /** The handler loaded and its setup begins (only with a setup): the slot is setting up. */
  | { readonly type: "setting-up" }
  /** setup's `progress(text)`. */
  | { readonly type: "setup-progress"; readonly text: string }
  /** setup threw or timed out: the thread serves no job (the worker is unfit, `check=setup`). */
  | { readonly type: "setup-failed"; readonly reason: string }
  /** teardown ended (done, failed or cut short: it logged which). */
  | { readonly type: "torn-down" }
  | { readonly type: "started"; readonly at: number }
  /** A progress update; `index` names the job within the run. */
  | { readonly type: "progress"; readonly json: string; readonly index: number }
  /** Job `index` of the run streams. */
  | { readonly type: "streaming"; readonly index: number }
  /** Job `index` of the run made stream chunks. */
  | {
      readonly type: "chunks";
      readonly index: number;
      readonly seq: number;
      readonly bodies: readonly (string | Uint8Array)[];
      readonly bytes: number;
    }
  /** Spans the handler made, each sent as it ended (telemetry on): the main thread exports them. */
  | { readonly type: "spans"; readonly spans: ShippedSpan[] }
  /** One outcome per job of the run, in order. */
  | { readonly type: "result"; readonly outcomes: readonly ExecuteOutcome[] };

/** True inside a thread started by runlet to run jobs (a bundle's entry checks this first). */
export function isRunnerThread(): boolean {
  return !isMainThread && (workerData as { runletRole?: unknown } | null)?.runletRole === "runner";
}

/**
 * Runs `definition.setup` on this isolation thread, then serves jobs until the main thread
 * terminates it. Jobs sent while setup runs wait in the port (listened to only once it is done),
 * so setup is never inside a job's execution time.
 */
export function runRunnerThread(definition: HandlerDefinition): void {
  if (!isRunnerThread() || parentPort === null) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      "runRunnerThread() runs only inside a runlet isolation thread",
    );
  }
  const port = parentPort;
  const data = workerData as RunnerThreadData;
  const log = createLogger({ platform: data.log.platform, level: data.log.level, secrets: data.log.secrets });
  if (definition.setup === undefined) {
    serveJobs(port, definition, data, log, undefined);
    return;
  }
  port.postMessage({ type: "setting-up" } satisfies FromThread);
  const setUp = runSetup(definition, {
    log,
    clock: realClock({ unref: false }),
    progress: (text) => port.postMessage({ type: "setup-progress", text } satisfies FromThread),
  }).then((outcome) => {
    if (outcome.ok) serveJobs(port, definition, data, log, outcome.state);
    else port.postMessage({ type: "setup-failed", reason: outcome.reason } satisfies FromThread);
  });
  // runSetup never rejects; serving jobs failing to begin is this thread's end.
  settle(setUp, (err) => log.error({ err }, "the isolation thread could not begin serving jobs"));
}

/** The thread's job loop, once setup is done: `state` is every job's `ctx.state`. */
function serveJobs(
  port: NonNullable<typeof parentPort>,
  definition: HandlerDefinition,
  data: RunnerThreadData,
  log: ReturnType<typeof createLogger>,
  state: unknown,
): void {
  const identity: ReportIdentity = data.settings.identity;
  /** The run's own signal (a batch's), and each job's. */
  let controller: AbortController | undefined;
  let jobControllers: AbortController[] = [];
  let batch = false;
  let runId: number | undefined;
  let seq = 0;
  const credits = new Map<number, () => void>();
  // Telemetry on: a run carries the spans its handler calls run under (src/telemetry/thread.ts).
  const traced = threadTracer(log, (spans) =>
    port.postMessage({ type: "spans", spans } satisfies FromThread),
  );
  // Job `index`'s ExecuteHooks in this thread: each call becomes a message; ThreadRunner on the
  // main thread hands it to the job's ActiveJob, and a "credit" answers a chunk once it may go on.
  const hooksOf = (index: number) => ({
    progress: (json: string) => port.postMessage({ type: "progress", json, index } satisfies FromThread),
    streaming: () => port.postMessage({ type: "streaming", index } satisfies FromThread),
    chunks: (bodies: readonly (string | Uint8Array)[], bytes: number) => {
      seq += 1;
      const mine = seq;
      return new Promise<void>((resolve) => {
        credits.set(mine, resolve);
        port.postMessage(
          { type: "chunks", index, seq: mine, bodies, bytes } satisfies FromThread,
          ownBuffers(bodies),
        );
      });
    },
  });
  /** One path for every run: its signals, its start, the one front of the executors, its one result message. */
  const run = (msg: RunMessage): void => {
    runId = msg.runId;
    batch = msg.batchId !== undefined;
    jobControllers = msg.jobs.map(() => new AbortController());
    controller = new AbortController();
    const startedAt = Date.now();
    port.postMessage({ type: "started", at: startedAt } satisfies FromThread);
    const spanOf = (index: number | undefined) =>
      index === undefined ? msg.trace?.span : (msg.trace?.jobs?.[index] ?? msg.trace?.span);
    const outcomes = executeRun({
      definition,
      batchId: msg.batchId,
      members: msg.jobs.map((job, index) => ({
        job,
        signal: jobControllers[index]!.signal,
        deadline: startedAt + (msg.timeoutsMs[index] ?? 0),
        log: tracedLog(log.child({ requestId: job.id }), spanOf(index)),
        hooks: hooksOf(index),
      })),
      signal: controller.signal,
      log: tracedLog(batch ? log.child({ batchId: msg.batchId }) : log, msg.trace?.span),
      identity,
      s3: s3Options(data.settings),
      state,
      around: (index, execute) => {
        const span = spanOf(index);
        return traced(span === undefined ? undefined : { span }, execute)(undefined);
      },
    });
    // executeRun never rejects; a result that cannot be posted (it does not clone) is logged.
    settle(
      outcomes.then((done) => port.postMessage({ type: "result", outcomes: done } satisfies FromThread)),
      (err) => log.error({ err }, "sending the run's result to the main thread failed"),
    );
  };
  port.on("message", (msg: ToThread) => {
    if (msg.type === "run") run(msg);
    else if (msg.type === "abort") {
      if (msg.runId !== runId) return;
      const reason = new RunletError(msg.code, msg.message);
      if (msg.index !== undefined) jobControllers[msg.index]?.abort(reason);
      else if (batch) controller?.abort(reason);
      else for (const each of jobControllers) each.abort(reason);
    } else if (msg.type === "credit") {
      credits.get(msg.seq)?.();
      credits.delete(msg.seq);
    } else if (msg.type === "teardown") {
      settle(
        runTeardown(definition, state, msg.withinMs, log, realClock({ unref: false })).then(() =>
          port.postMessage({ type: "torn-down" } satisfies FromThread),
        ),
        (err) => log.error({ err }, "the isolation thread's teardown failed"),
      );
    }
  });
  port.postMessage({ type: "ready" } satisfies FromThread);
}

/**
 * The memory of byte bodies that own all of theirs (a large item's chunks), moved to the main
 * thread rather than copied. A body sharing memory (a slice of Node's small-Buffer pool) is copied.
 */
function ownBuffers(bodies: readonly (string | Uint8Array)[]): ArrayBuffer[] {
  const moved: ArrayBuffer[] = [];
  for (const body of bodies) {
    if (typeof body === "string") continue;
    const { buffer } = body;
    if (buffer instanceof ArrayBuffer && body.byteOffset === 0 && buffer.byteLength === body.byteLength) {
      moved.push(buffer);
    }
  }
  return moved;
}
