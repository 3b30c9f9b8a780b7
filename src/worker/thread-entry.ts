import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { RunletError, type RunletErrorCode } from "../errors.js";
import type { HandlerDefinition } from "../handler/define-handler.js";
import { executeJob } from "../handler/execute.js";
import { failedResult, type ReportIdentity } from "../handler/outcome.js";
import { createLogger } from "../log/index.js";
import type { DeliveredJob } from "../protocol/index.js";
import { type ExecutorSettings, s3Options } from "./executor.js";

/**
 * The isolation thread's side (`isolation: "thread"`): receives jobs from the main thread, runs
 * them with the same executeJob as in-process, and sends progress, chunks and the result back.
 * The main thread does all networking. Contract for bundles: docs/worker.md, "Thread entry".
 */

/** `workerData` of an isolation thread. */
export interface ExecutorWorkerData {
  readonly runletRole: "executor";
  /** The file the thread imports: this module (sources) or a bundle's own file. */
  readonly entryUrl: string;
  /** Sources only: the handler module whose default export runs; a bundle has it built in. */
  readonly handlerUrl: string | undefined;
  /** File URL of tsx's ESM API, when TypeScript must be loadable in the thread. */
  readonly tsxApiUrl: string | undefined;
  readonly log: { readonly platform: boolean; readonly level: string; readonly secrets: readonly string[] };
  readonly settings: ExecutorSettings;
}

/** Main → thread messages. */
export type ToThread =
  | { readonly type: "run"; readonly runId: number; readonly job: DeliveredJob; readonly timeoutMs: number }
  /**
   * Aborts run `runId` only (cancellation is keyed by run): a stop or deadline that reaches the thread after that run
   * ended must not touch the next job the thread runs.
   */
  | {
      readonly type: "abort";
      readonly runId: number;
      readonly code: RunletErrorCode;
      readonly message: string;
    }
  | { readonly type: "credit"; readonly seq: number };

/** Thread → main messages. */
export type FromThread =
  /** The handler loaded and the thread serves jobs: an error before this is a load failure. */
  | { readonly type: "ready" }
  | { readonly type: "started"; readonly at: number }
  | { readonly type: "progress"; readonly json: string }
  | { readonly type: "streaming" }
  | {
      readonly type: "chunks";
      readonly seq: number;
      readonly bodies: readonly (string | Uint8Array)[];
      readonly bytes: number;
    }
  | { readonly type: "result"; readonly outcome: Awaited<ReturnType<typeof executeJob>> };

/** True inside a thread started by runlet to run jobs (a bundle's entry checks this first). */
export function isExecutorThread(): boolean {
  return !isMainThread && (workerData as { runletRole?: unknown } | null)?.runletRole === "executor";
}

/** Serves jobs for `definition` on this isolation thread until the main thread terminates it. */
export function runExecutorThread(definition: HandlerDefinition): void {
  if (!isExecutorThread() || parentPort === null) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      "runExecutorThread() runs only inside a runlet isolation thread",
    );
  }
  const port = parentPort;
  const data = workerData as ExecutorWorkerData;
  const log = createLogger({ platform: data.log.platform, level: data.log.level, secrets: data.log.secrets });
  const identity: ReportIdentity = data.settings.identity;
  let controller: AbortController | undefined;
  let runId: number | undefined;
  let seq = 0;
  const credits = new Map<number, () => void>();
  port.on("message", (msg: ToThread) => {
    if (msg.type === "abort") {
      if (msg.runId === runId) controller?.abort(new RunletError(msg.code, msg.message));
    } else if (msg.type === "credit") {
      credits.get(msg.seq)?.();
      credits.delete(msg.seq);
    } else if (msg.type === "run") {
      controller = new AbortController();
      runId = msg.runId;
      const startedAt = Date.now();
      port.postMessage({ type: "started", at: startedAt } satisfies FromThread);
      void executeJob({
        definition,
        job: msg.job,
        signal: controller.signal,
        deadline: startedAt + msg.timeoutMs,
        log: log.child({ requestId: msg.job.id }),
        identity,
        s3: s3Options(data.settings),
        // This thread's ExecuteHooks: each call becomes a message; ThreadExecutor on the main thread
        // hands it to the job's ActiveJob, and a "credit" answers a chunk once it may go on.
        hooks: {
          progress: (json) => port.postMessage({ type: "progress", json } satisfies FromThread),
          streaming: () => port.postMessage({ type: "streaming" } satisfies FromThread),
          chunks: (bodies, bytes) => {
            seq += 1;
            const mine = seq;
            return new Promise<void>((resolve) => {
              credits.set(mine, resolve);
              port.postMessage(
                { type: "chunks", seq: mine, bodies, bytes } satisfies FromThread,
                ownBuffers(bodies),
              );
            });
          },
        },
      })
        .catch(
          // executeJob never rejects; this keeps the job's promise total should that ever change.
          (err: unknown): Awaited<ReturnType<typeof executeJob>> => ({
            result: failedResult(err, identity, definition.refreshWorker),
            metrics: {},
          }),
        )
        .then((outcome) => port.postMessage({ type: "result", outcome } satisfies FromThread));
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
