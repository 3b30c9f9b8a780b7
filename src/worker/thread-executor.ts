import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import type { RunletErrorCode } from "../errors.js";
import type { ExecuteHooks, ExecuteOutcome } from "../handler/execute.js";
import type { ExecHandle, ExecRequest, Executor, ExecutorSettings } from "./executor.js";
import type { ExecutorWorkerData, FromThread, ToThread } from "./thread-entry.js";
import type { WorkerStopper } from "./worker-stopper.js";

/**
 * `isolation: "thread"`: each running job owns a worker thread; a hard stop terminates it (even a
 * synchronous `while (true) {}`) and the next job gets a fresh one. Idle threads are reused.
 */

/**
 * Bootstraps a thread from any setting: registers tsx when TypeScript must load, imports the
 * entry, and, for sources, hands the handler's default export to the entry's runExecutorThread.
 * A bundle's entry runs itself on import (it checks isExecutorThread()).
 */
const BOOTSTRAP = `
const { workerData } = require("node:worker_threads");
(async () => {
  if (workerData.tsxApiUrl) (await import(workerData.tsxApiUrl)).register();
  const entry = await import(workerData.entryUrl);
  if (workerData.handlerUrl) {
    const handler = await import(workerData.handlerUrl);
    entry.runExecutorThread(handler.default);
  }
})().catch((err) => { setImmediate(() => { throw err; }); });
`;

const TS_FILE = /\.(c|m)?tsx?$/;

/** The file URL of tsx's ESM API (its CommonJS build cannot register the ESM loader in a thread). */
export function tsxApiUrl(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve("tsx/package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as {
    exports: Record<string, { import?: { default?: string } }>;
  };
  const target = manifest.exports["./esm/api"]?.import?.default ?? "./dist/esm/api/index.mjs";
  return pathToFileURL(join(dirname(manifestPath), target)).href;
}

/** Options of {@link ThreadExecutor}. */
export interface ThreadExecutorOptions {
  /** The thread's entry file URL: thread-entry (sources) or a bundle's own file. */
  readonly entryUrl: string;
  /** Sources: the handler module (path or URL). Undefined for a bundle. */
  readonly handlerModule: string | undefined;
  readonly log: ExecutorWorkerData["log"];
  readonly settings: ExecutorSettings;
  /** The main thread's logger, for a thread's failure outside any job. */
  readonly logger: Logger;
  /**
   * Told once, with a one-line reason, when a thread fails before its handler loaded: the handler
   * loads here but not in a thread, so the worker is unfit (docs/protocol.md, "Unfit workers"). No thread is
   * started again and every job fails with that reason.
   */
  readonly stopper: WorkerStopper;
}

function toUrl(pathOrUrl: string): string {
  return /^[a-z]+:\/\//i.test(pathOrUrl) ? pathOrUrl : pathToFileURL(pathOrUrl).href;
}

/** The default entry when running from sources or the CLI: this folder's thread-entry module. */
export function defaultThreadEntryUrl(): string {
  return new URL(import.meta.url.endsWith(".ts") ? "./thread-entry.ts" : "./thread-entry.js", import.meta.url)
    .href;
}

export class ThreadExecutor implements Executor {
  readonly #data: ExecutorWorkerData;
  readonly #idle: Thread[] = [];
  readonly #all = new Set<Thread>();
  /** Threads whose handler loaded. */
  readonly #ready = new WeakSet<Thread>();
  /** Threads running a job (that job's listener reports the thread's failure). */
  readonly #busy = new WeakSet<Thread>();
  readonly #logger: Logger;
  readonly #stopper: WorkerStopper;
  /** Why the handler could not load in a thread; once set, nothing runs. */
  #loadFailure: string | undefined;
  #closed = false;
  /** Numbers each run, so an abort names the run it is for (cancellation is keyed by run). */
  #runs = 0;

  constructor(options: ThreadExecutorOptions) {
    this.#logger = options.logger;
    this.#stopper = options.stopper;
    const handlerUrl = options.handlerModule === undefined ? undefined : toUrl(options.handlerModule);
    const needsTsx =
      TS_FILE.test(new URL(options.entryUrl).pathname) ||
      (handlerUrl !== undefined && TS_FILE.test(new URL(handlerUrl).pathname));
    this.#data = {
      runletRole: "executor",
      entryUrl: options.entryUrl,
      handlerUrl,
      // Resolved lazily: a bundle (plain .mjs) never needs tsx and may not ship it.
      tsxApiUrl: needsTsx ? tsxApiUrl() : undefined,
      log: options.log,
      settings: options.settings,
    };
    // A warm thread has loaded tsx, zod and the handler before the first job's clock runs.
    this.#idle.push(this.#spawn());
  }

  #spawn(): Thread {
    const thread = new Thread(BOOTSTRAP, { eval: true, workerData: this.#data });
    this.#all.add(thread);
    thread.on("message", (msg: FromThread) => {
      if (msg.type === "ready") this.#ready.add(thread);
    });
    // Always listened to: an unheard 'error' of a Worker is thrown in the main thread and ends
    // the process with a stack trace. A running job's own listener reports its failure.
    thread.on("error", (err: Error) => {
      if (!this.#ready.has(thread)) this.#loadFailed(err);
      else if (!this.#busy.has(thread)) this.#logger.error({ err }, "an idle isolation thread failed");
    });
    thread.once("exit", () => {
      this.#all.delete(thread);
      const at = this.#idle.indexOf(thread);
      if (at >= 0) this.#idle.splice(at, 1);
    });
    return thread;
  }

  #loadFailed(err: Error): void {
    if (this.#loadFailure !== undefined) return;
    // One line, no stack: the user's module did not load, which runlet's frames do not explain.
    this.#loadFailure = `the handler failed to load in an isolation thread: ${err.name || "Error"}: ${err.message}`;
    this.#idle.length = 0;
    void this.#stopper.unfit("handler-load", this.#loadFailure);
  }

  /** The outcome of a job that cannot run because the handler does not load. */
  #loadFailureOutcome(reason: string): ExecuteOutcome {
    return {
      result: {
        kind: "error",
        message: `${reason}; this worker is unfit and stops`,
        code: "RUNLET_HANDLER_LOAD",
        stopPod: false,
      },
      metrics: {},
    };
  }

  run(request: ExecRequest, hooks: ExecuteHooks): ExecHandle {
    if (this.#loadFailure !== undefined) {
      return {
        started: Promise.resolve(Date.now()),
        outcome: Promise.resolve(this.#loadFailureOutcome(this.#loadFailure)),
        abort: () => undefined,
        hardStop: async () => true,
      };
    }
    const thread = this.#idle.pop() ?? this.#spawn();
    this.#busy.add(thread);
    this.#runs += 1;
    const runId = this.#runs;
    /** Set once the outcome exists: the handle is inert from then on, the thread may run another job. */
    let ended = false;
    let settle!: (outcome: ExecuteOutcome | "killed") => void;
    const outcome = new Promise<ExecuteOutcome | "killed">((resolve) => {
      settle = resolve;
    });
    let killed = false;
    let markStarted!: (at: number) => void;
    const started = new Promise<number>((resolve) => {
      markStarted = resolve;
    });
    const send = (msg: ToThread): void => thread.postMessage(msg);
    const onMessage = (msg: FromThread): void => {
      if (msg.type === "started") markStarted(msg.at);
      else if (msg.type === "progress") hooks.progress(msg.json);
      else if (msg.type === "streaming") hooks.streaming?.();
      else if (msg.type === "chunks") {
        // One sink for this promise (every floating promise ends in one sink): the credit goes either way, so the thread never stalls.
        hooks.chunks(msg.bodies, msg.bytes).then(
          () => send({ type: "credit", seq: msg.seq }),
          (err: unknown) => {
            request.log.error({ err }, "queueing this job's stream chunks failed");
            send({ type: "credit", seq: msg.seq });
          },
        );
      } else if (msg.type === "result") {
        ended = true;
        cleanup();
        if (!this.#closed) this.#idle.push(thread);
        settle(msg.outcome);
      }
    };
    let failure: Error | undefined;
    const onError = (err: Error): void => {
      failure = err;
      // A failure to load is the executor's to report (once, without a stack), not this job's.
      if (this.#ready.has(thread)) request.log.error({ err }, "the isolation thread failed");
    };
    const onExit = (code: number): void => {
      ended = true;
      cleanup();
      markStarted(Date.now());
      // The slot keeps serving: warm a replacement now rather than on the next job's clock.
      if (!this.#closed && this.#loadFailure === undefined && this.#idle.length === 0) {
        this.#idle.push(this.#spawn());
      }
      if (killed) {
        settle("killed");
        return;
      }
      if (this.#loadFailure !== undefined && !this.#ready.has(thread)) {
        settle(this.#loadFailureOutcome(this.#loadFailure));
        return;
      }
      settle({
        result: {
          kind: "error",
          message: `the isolation thread running this job exited unexpectedly (exit code ${code})${failure === undefined ? "" : `: ${failure.message}`}`,
          code: "RUNLET_JOB_THREAD_DIED",
          stopPod: false,
        },
        metrics: {},
      });
    };
    const cleanup = (): void => {
      this.#busy.delete(thread);
      thread.off("message", onMessage);
      thread.off("error", onError);
      thread.off("exit", onExit);
    };
    thread.on("message", onMessage);
    thread.on("error", onError);
    thread.on("exit", onExit);
    send({ type: "run", runId, job: request.job, timeoutMs: request.timeoutMs });
    return {
      started,
      outcome,
      abort: (reason) => {
        if (ended) return;
        const code = (reason as { code?: unknown }).code;
        send({
          type: "abort",
          runId,
          code: (typeof code === "string" ? code : "RUNLET_JOB_STOPPED") as RunletErrorCode,
          message: reason.message,
        });
      },
      hardStop: async () => {
        // The thread is back in the pool or gone: terminating it now would kill another job.
        if (ended) return true;
        killed = true;
        await thread.terminate();
        return true;
      },
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#idle.length = 0;
    await Promise.all([...this.#all].map((thread) => thread.terminate()));
  }
}
