import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../clock.js";
import type { RunletErrorCode } from "../errors.js";
import type { ExecuteHooks, ExecuteOutcome } from "../handler/execute.js";
import { onAbort } from "../linked-signal.js";
import { launchInSpan, threadTrace } from "../telemetry/link.js";
import type { BatchRun, BatchRunRequest } from "./batch-runner.js";
import {
  type ExecHandle,
  type ExecRequest,
  type ExecutorSettings,
  RunEnd,
  type Runner,
  type RunnerStart,
} from "./executor.js";
import { SETUP_CHECK, type SetupOutcome } from "./setup.js";
import { EXECUTOR_BOOTSTRAP, TS_FILE, toUrl, tsxApiUrl } from "./thread-bootstrap.js";
import type { ExecutorWorkerData, FromThread, RunMessage, ToThread } from "./thread-entry.js";

/**
 * `isolation: "thread"`: each running job owns a worker thread; a hard stop terminates it (even a
 * synchronous `while (true) {}`) and the next job gets a fresh one. Idle threads are reused. Each
 * thread runs the handler's `setup` once, when it starts (before it serves a job, outside any
 * job's execution time): the first at the worker's start, the others when a job needs one or a
 * hard-stopped thread is replaced.
 */

/** Options of {@link ThreadRunner}. */
export interface ThreadRunnerOptions {
  /** The thread's entry file URL: thread-entry (sources) or a bundle's own file. */
  readonly entryUrl: string;
  /** Sources: the handler module (path or URL). Undefined for a bundle. */
  readonly handlerModule: string | undefined;
  readonly log: ExecutorWorkerData["log"];
  readonly settings: ExecutorSettings;
  /** The main thread's logger, for a thread's failure outside any job. */
  readonly logger: Logger;
  /**
   * Told once, with a one-line reason, when a thread fails before it could serve: its handler
   * does not load there (`handler-load`: it loads here but not in a thread), or its setup failed
   * (`setup`). The worker is unfit (docs/protocol.md, "Unfit workers"); no thread is started
   * again and every job fails with that reason.
   */
  readonly onUnfit: (check: string, reason: string) => void;
  /** The worker's clock: each thread's setup is bounded on it. */
  readonly clock: Clock;
  /** The handler's `setup`, if any: whether it has one, and `setupTimeoutMs`. */
  readonly setup: { readonly present: boolean; readonly timeoutMs: number };
}

/** The default entry when running from sources or the CLI: this folder's thread-entry module. */
export function defaultThreadEntryUrl(): string {
  return new URL(import.meta.url.endsWith(".ts") ? "./thread-entry.ts" : "./thread-entry.js", import.meta.url)
    .href;
}

/** How one run on a thread ended: the thread's answer, a hard stop, or a failure (load, exit). */
type ThreadEnd =
  | { readonly kind: "result"; readonly outcomes: readonly ExecuteOutcome[] }
  | { readonly kind: "killed" }
  | { readonly kind: "failed"; readonly outcome: ExecuteOutcome };

/** Where a run's intermediate messages go (a batch's handler never streams: it returns its outputs). */
interface Relay {
  /** Job `index` of the run reported progress. */
  progress(index: number, json: string): void;
  streaming(): void;
  chunks: ExecuteHooks["chunks"];
  /** Spans the handler made in the thread (telemetry on), to export. */
  spans?: ((spans: Extract<FromThread, { type: "spans" }>["spans"]) => void) | undefined;
}

/** One run (a job or a batch) on a thread. */
interface ThreadRun {
  readonly started: Promise<number>;
  readonly end: Promise<ThreadEnd>;
  /** Aborts the run (`index`: one job of a batch) by a message naming the run. */
  abort(reason: Error, index?: number): void;
  hardStop(): Promise<boolean>;
}

export class ThreadRunner implements Runner {
  readonly #data: ExecutorWorkerData;
  readonly #options: ThreadRunnerOptions;
  /** The thread started with the runner: the worker's first take waits for its setup. */
  readonly #first: Thread;
  /** Each thread's readiness (its setup done), or why it cannot serve. */
  readonly #readiness = new WeakMap<Thread, Promise<SetupOutcome>>();
  readonly #idle: Thread[] = [];
  readonly #all = new Set<Thread>();
  /** Threads whose handler loaded. */
  readonly #ready = new WeakSet<Thread>();
  /** Threads running a job (that job's listener reports the thread's failure). */
  readonly #busy = new WeakSet<Thread>();
  readonly #logger: Logger;
  /** Why the handler could not load (or set up) in a thread; once set, nothing runs. */
  #loadFailure: string | undefined;
  #closed = false;
  /** Numbers each run, so an abort names the run it is for (cancellation is keyed by run). */
  #runs = 0;

  constructor(options: ThreadRunnerOptions) {
    this.#options = options;
    this.#logger = options.logger;
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
    // A warm thread has loaded tsx, zod and the handler (and run setup) before the first job's clock runs.
    this.#first = this.#spawn();
    this.#idle.push(this.#first);
  }

  #spawn(): Thread {
    const thread = new Thread(EXECUTOR_BOOTSTRAP, { eval: true, workerData: this.#data });
    this.#all.add(thread);
    let settle!: (outcome: SetupOutcome) => void;
    this.#readiness.set(
      thread,
      new Promise<SetupOutcome>((resolve) => {
        settle = resolve;
      }),
    );
    const { clock, setup } = this.#options;
    // setup is bounded on the worker's clock here (the thread bounds it on real time too).
    let setupTimer: ClockTimer | undefined;
    if (setup.present) {
      setupTimer = clock.setTimeout(() => {
        setupTimer = undefined;
        if (this.#ready.has(thread)) return;
        const reason = `setup did not finish within ${setup.timeoutMs} ms (setupTimeoutMs)`;
        this.#failedToServe(SETUP_CHECK, reason);
        settle({ ok: false, reason });
        void thread.terminate();
      }, setup.timeoutMs);
    }
    const setupEnded = (): void => {
      if (setupTimer !== undefined) clock.clearTimeout(setupTimer);
      setupTimer = undefined;
    };
    thread.on("message", (msg: FromThread) => {
      if (msg.type === "ready") {
        setupEnded();
        this.#ready.add(thread);
        settle({ ok: true, state: undefined });
      } else if (msg.type === "setup-progress") {
        if (thread === this.#first && this.#onFirstProgress !== undefined) this.#onFirstProgress(msg.text);
        else this.#logger.info({ setupProgress: msg.text }, "an isolation thread's setup");
      } else if (msg.type === "setup-failed") {
        setupEnded();
        this.#failedToServe(SETUP_CHECK, `${msg.reason} (in an isolation thread)`);
        settle({ ok: false, reason: msg.reason });
        void thread.terminate();
      }
    });
    // Always listened to: an unheard 'error' of a Worker is thrown in the main thread and ends
    // the process with a stack trace. A running job's own listener reports its failure.
    thread.on("error", (err: Error) => {
      if (!this.#ready.has(thread)) {
        setupEnded();
        // One line, no stack: the user's module did not load, which runlet's frames do not explain.
        const reason = `the handler failed to load in an isolation thread: ${err.name || "Error"}: ${err.message}`;
        this.#failedToServe("handler-load", reason);
        settle({ ok: false, reason });
      } else if (!this.#busy.has(thread)) this.#logger.error({ err }, "an idle isolation thread failed");
    });
    thread.once("exit", (code) => {
      setupEnded();
      settle({ ok: false, reason: `the isolation thread exited (code ${code}) before it could serve` });
      this.#all.delete(thread);
      const at = this.#idle.indexOf(thread);
      if (at >= 0) this.#idle.splice(at, 1);
    });
    return thread;
  }

  /** Where the first thread's setup progress goes while the worker waits for it. */
  #onFirstProgress: ((text: string) => void) | undefined;

  /** A thread cannot serve (its handler did not load, or its setup failed): the worker is unfit. */
  #failedToServe(check: string, reason: string): void {
    if (this.#loadFailure !== undefined || this.#closed) return;
    this.#loadFailure = reason;
    this.#idle.length = 0;
    this.#options.onUnfit(check, reason);
  }

  /**
   * Waits for the first thread's setup (the worker takes no job before it). Without a setup
   * nothing is waited for: the first job finds its thread loading, as before setup existed.
   */
  async setup(start: RunnerStart): Promise<SetupOutcome> {
    if (!this.#options.setup.present) return { ok: true, state: undefined };
    this.#onFirstProgress = (text) => start.progress(text);
    let unsubscribe: (() => void) | undefined;
    try {
      return await Promise.race([
        this.#readiness.get(this.#first)!,
        new Promise<SetupOutcome>((resolve) => {
          unsubscribe = onAbort(start.closing, () =>
            resolve({ ok: false, reason: "the worker closed while setup ran" }),
          );
        }),
      ]);
    } finally {
      unsubscribe?.();
      this.#onFirstProgress = undefined;
    }
  }

  /**
   * Runs teardown in every thread whose setup is done and that runs no job, for at most
   * `withinMs`; a thread still running a job is ended by close() without it.
   */
  async teardown(withinMs: number): Promise<void> {
    if (!this.#options.setup.present) return;
    const { clock } = this.#options;
    const threads = [...this.#all].filter((t) => this.#ready.has(t) && !this.#busy.has(t));
    let timer: ClockTimer | undefined;
    await Promise.race([
      Promise.all(
        threads.map(
          (thread) =>
            new Promise<void>((resolve) => {
              const onMessage = (msg: FromThread): void => {
                if (msg.type !== "torn-down") return;
                thread.off("message", onMessage);
                thread.off("exit", onExit);
                resolve();
              };
              const onExit = (): void => {
                thread.off("message", onMessage);
                resolve();
              };
              thread.on("message", onMessage);
              thread.once("exit", onExit);
              thread.postMessage({ type: "teardown", withinMs } satisfies ToThread);
            }),
        ),
      ),
      new Promise<void>((resolve) => {
        timer = clock.setTimeout(resolve, Math.max(0, withinMs));
      }),
    ]);
    if (timer !== undefined) clock.clearTimeout(timer);
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
    const runId = this.#nextRunId();
    request.onLaunch(Date.now());
    // Inside the job's handler span when telemetry is on: the thread runs the handler under it.
    const onThread = launchInSpan(hooks.wrapHandler?.bind(hooks), request.log, (log, link) =>
      this.#launch(
        {
          type: "run",
          runId,
          batchId: undefined,
          jobs: [request.job],
          timeoutsMs: [request.timeoutMs],
          trace: threadTrace(link),
        },
        log,
        {
          progress: (_index, json) => hooks.progress(json),
          streaming: () => hooks.streaming?.(),
          chunks: (bodies, bytes) => hooks.chunks(bodies, bytes),
          spans: link?.receive,
        },
      ),
    );
    return {
      started: onThread.started,
      outcome: onThread.end.then((end) => {
        if (end.kind === "killed") return "killed";
        if (end.kind !== "result") return end.outcome;
        return end.outcomes[0] ?? this.#diedOutcome(0, undefined);
      }),
      abort: (reason) => onThread.abort(reason),
      hardStop: onThread.hardStop,
    };
  }

  /**
   * Runs a batch (batch-scheduler.ts) on one thread: a hard stop terminates the thread, and each
   * job of the batch then ends as the batch executor decides (each was already let go).
   */
  runBatch(request: BatchRunRequest): BatchRun {
    const count = request.members.length;
    const each = (outcome: ExecuteOutcome): ExecuteOutcome[] => request.members.map(() => outcome);
    if (this.#loadFailure !== undefined) {
      return {
        started: Promise.resolve(Date.now()),
        outcomes: Promise.resolve(each(this.#loadFailureOutcome(this.#loadFailure))),
        abortJob: () => undefined,
        abortBatch: () => undefined,
        hardStop: async () => true,
      };
    }
    const runId = this.#nextRunId();
    const onThread = this.#launch(
      {
        type: "run",
        runId,
        batchId: request.batchId,
        jobs: request.members.map((member) => member.job),
        timeoutsMs: request.members.map((member) => member.timeoutMs),
        trace: threadTrace(request.trace),
      },
      request.log,
      {
        progress: (index, json) => request.members[index]?.progress(json),
        streaming: () => undefined,
        chunks: async () => undefined,
        spans: request.trace?.receive,
      },
    );
    return {
      started: onThread.started,
      outcomes: onThread.end.then((end) => {
        if (end.kind === "killed") return "killed";
        if (end.kind !== "result") return each(end.outcome);
        return end.outcomes.length === count ? end.outcomes : each(this.#diedOutcome(0, undefined));
      }),
      abortJob: (index, reason) => onThread.abort(reason, index),
      abortBatch: (reason) => onThread.abort(reason),
      hardStop: onThread.hardStop,
    };
  }

  #nextRunId(): number {
    this.#runs += 1;
    return this.#runs;
  }

  #diedOutcome(code: number, failure: Error | undefined): ExecuteOutcome {
    return {
      result: {
        kind: "error",
        message: `the isolation thread running this job exited unexpectedly (exit code ${code})${failure === undefined ? "" : `: ${failure.message}`}`,
        code: "RUNLET_JOB_THREAD_DIED",
        stopPod: false,
      },
      metrics: {},
    };
  }

  /**
   * Sends `message` (a job or a batch) to an idle thread (or a new one) and relays what the thread
   * answers until its result, a hard stop or the thread's exit; the thread then goes back to the pool.
   */
  #launch(message: RunMessage, log: Logger, relay: Relay): ThreadRun {
    const thread = this.#idle.pop() ?? this.#spawn();
    this.#busy.add(thread);
    const { runId } = message;
    /** Ended once the end exists: the run is inert from then on, the thread may run another job. */
    const runEnd = new RunEnd();
    let settle!: (end: ThreadEnd) => void;
    const end = new Promise<ThreadEnd>((resolve) => {
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
      else if (msg.type === "progress") relay.progress(msg.index, msg.json);
      else if (msg.type === "streaming") relay.streaming();
      else if (msg.type === "spans") relay.spans?.(msg.spans);
      else if (msg.type === "chunks") {
        // One sink for this promise (every floating promise ends in one sink): the credit goes either way, so the thread never stalls.
        relay.chunks(msg.bodies, msg.bytes).then(
          () => send({ type: "credit", seq: msg.seq }),
          (err: unknown) => {
            log.error({ err }, "queueing this job's stream chunks failed");
            send({ type: "credit", seq: msg.seq });
          },
        );
      } else if (msg.type === "result") {
        runEnd.end();
        cleanup();
        if (!this.#closed) this.#idle.push(thread);
        settle({ kind: "result", outcomes: msg.outcomes });
      }
    };
    let failure: Error | undefined;
    const onError = (err: Error): void => {
      failure = err;
      // A failure to load is the executor's to report (once, without a stack), not this job's.
      if (this.#ready.has(thread)) log.error({ err }, "the isolation thread failed");
    };
    const onExit = (code: number): void => {
      runEnd.end();
      cleanup();
      markStarted(Date.now());
      // The slot keeps serving: warm a replacement now rather than on the next job's clock.
      if (!this.#closed && this.#loadFailure === undefined && this.#idle.length === 0) {
        this.#idle.push(this.#spawn());
      }
      if (killed) settle({ kind: "killed" });
      else if (this.#loadFailure !== undefined && !this.#ready.has(thread)) {
        settle({ kind: "failed", outcome: this.#loadFailureOutcome(this.#loadFailure) });
      } else settle({ kind: "failed", outcome: this.#diedOutcome(code, failure) });
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
    send(message);
    return {
      started,
      end,
      abort: runEnd.guard((reason: Error, index?: number) => {
        const code = (reason as { code?: unknown }).code;
        send({
          type: "abort",
          runId,
          ...(index === undefined ? {} : { index }),
          code: (typeof code === "string" ? code : "RUNLET_JOB_STOPPED") as RunletErrorCode,
          message: reason.message,
        });
      }),
      hardStop: async () => {
        // The thread is back in the pool or gone: terminating it now would kill another job.
        if (runEnd.ended) return true;
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
