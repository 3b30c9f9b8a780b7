import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import type { RunletErrorCode } from "../../errors.js";
import type { ExecuteOutcome } from "../../handler/execute.js";
import { onAbort } from "../../linked-signal.js";
import { StateMachine, type Transitions } from "../../state-machine.js";
import { settle } from "../../task-sink.js";
import { type SpanRef, type ThreadTrace, type TraceLink, threadTrace } from "../../telemetry/link.js";
import { type Run, RunEnd, type RunHandle, type RunJob } from "./run.js";
import type { Runner, RunnerSettings, RunnerStart } from "./runner.js";
import { SETUP_CHECK, type SetupOutcome } from "./setup.js";
import { RUNNER_THREAD_BOOTSTRAP, TS_FILE, toUrl, tsxApiUrl } from "./thread-bootstrap.js";
import type { FromThread, RunMessage, RunnerThreadData, ToThread } from "./thread-entry.js";

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
  readonly log: RunnerThreadData["log"];
  readonly settings: RunnerSettings;
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

/** One run on a thread. */
interface ThreadRun {
  readonly started: Promise<number>;
  readonly end: Promise<ThreadEnd>;
  /** Aborts the run (`index`: one job of it) by a message naming the run. */
  abort(reason: Error, index?: number): void;
  hardStop(): Promise<boolean>;
}

/**
 * An isolation thread's life, one state machine (src/state-machine.ts):
 * - `loading`: spawned; its handler module loads.
 * - `setting-up`: loaded; its `setup` runs (only with a setup).
 * - `idle`: ready, running nothing.
 * - `busy`: running a run (a job or a batch).
 * - `dead`: exited, terminated, or unable to serve (its load or setup failed).
 * A run may be handed to a slot still loading or setting up (it waits in the thread's port, which
 * the thread reads once ready): the slot then holds it, and enters `busy`, not `idle`, when ready.
 */
export type SlotState = "loading" | "setting-up" | "idle" | "busy" | "dead";

const SLOT_MOVES: Transitions<SlotState> = {
  loading: ["setting-up", "idle", "busy", "dead"],
  "setting-up": ["idle", "busy", "dead"],
  idle: ["busy", "dead"],
  busy: ["idle", "dead"],
  dead: [],
};

/** One isolation thread and its life. */
class Slot {
  readonly thread: Thread;
  readonly life: StateMachine<SlotState>;
  /** Resolves when the slot is ready (setup done), or with why it cannot serve. */
  readonly ready: Promise<SetupOutcome>;
  /** The run this slot holds (waiting in the port while the slot is not yet ready). */
  held: number | undefined;
  /** True once the slot was ready: a failure after this is a job's or an idle thread's, not a load failure. */
  served = false;
  #settle!: (outcome: SetupOutcome) => void;

  constructor(thread: Thread, index: number) {
    this.thread = thread;
    this.life = new StateMachine(
      `isolation thread ${index}`,
      SLOT_MOVES,
      "loading",
      "RUNLET_WORKER_STATE",
      (_from, to) => {
        if (to === "idle" || to === "busy") this.served = true;
      },
    );
    this.ready = new Promise((resolve) => {
      this.#settle = resolve;
    });
  }

  /** Free for a new run: idle, or still getting ready with no run held. */
  get free(): boolean {
    return this.life.is("idle") || (this.life.is("loading", "setting-up") && this.held === undefined);
  }

  /** The slot's readiness is known (first call wins). */
  settle(outcome: SetupOutcome): void {
    this.#settle(outcome);
  }
}

export class ThreadRunner implements Runner {
  /** A hard stop terminates the run's thread. */
  readonly canHardStop = true;
  readonly #data: RunnerThreadData;
  readonly #options: ThreadRunnerOptions;
  /** The thread the runner's start spawns: the worker's first take waits for its setup. */
  #first: Slot | undefined;
  /** Every slot whose thread is alive; each slot's state says the rest. */
  readonly #slots = new Set<Slot>();
  readonly #logger: Logger;
  /** Why the handler could not load (or set up) in a thread; once set, nothing runs. */
  #loadFailure: string | undefined;
  #closed = false;
  /** Numbers each run, so an abort names the run it is for (cancellation is keyed by run). */
  #runs = 0;
  /** Numbers each slot, for messages. */
  #spawned = 0;

  /** Builds the runner; no thread starts before {@link ThreadRunner.start}. */
  constructor(options: ThreadRunnerOptions) {
    this.#options = options;
    this.#logger = options.logger;
    const handlerUrl = options.handlerModule === undefined ? undefined : toUrl(options.handlerModule);
    const needsTsx =
      TS_FILE.test(new URL(options.entryUrl).pathname) ||
      (handlerUrl !== undefined && TS_FILE.test(new URL(handlerUrl).pathname));
    this.#data = {
      runletRole: "runner",
      entryUrl: options.entryUrl,
      handlerUrl,
      // Resolved lazily: a bundle (plain .mjs) never needs tsx and may not ship it.
      tsxApiUrl: needsTsx ? tsxApiUrl() : undefined,
      log: options.log,
      settings: options.settings,
    };
  }

  #spawn(): Slot {
    this.#spawned += 1;
    const thread = new Thread(RUNNER_THREAD_BOOTSTRAP, { eval: true, workerData: this.#data });
    const slot = new Slot(thread, this.#spawned);
    this.#slots.add(slot);
    const { clock, setup } = this.#options;
    // setup is bounded on the worker's clock from the spawn (the thread bounds it on real time too).
    let setupTimer: ClockTimer | undefined;
    if (setup.present) {
      setupTimer = clock.setTimeout(() => {
        setupTimer = undefined;
        if (slot.served) return;
        const reason = `setup did not finish within ${setup.timeoutMs} ms (setupTimeoutMs)`;
        this.#failedToServe(SETUP_CHECK, reason);
        slot.settle({ ok: false, reason });
        this.#end(thread);
      }, setup.timeoutMs);
    }
    const setupEnded = (): void => {
      if (setupTimer !== undefined) clock.clearTimeout(setupTimer);
      setupTimer = undefined;
    };
    thread.on("message", (msg: FromThread) => {
      if (msg.type === "ready") {
        setupEnded();
        slot.life.move(slot.held === undefined ? "idle" : "busy");
        slot.settle({ ok: true, state: undefined });
      } else if (msg.type === "setting-up") {
        slot.life.move("setting-up");
      } else if (msg.type === "setup-progress") {
        if (slot === this.#first && this.#onFirstProgress !== undefined) this.#onFirstProgress(msg.text);
        else this.#logger.info({ setupProgress: msg.text }, "an isolation thread's setup");
      } else if (msg.type === "setup-failed") {
        setupEnded();
        this.#failedToServe(SETUP_CHECK, `${msg.reason} (in an isolation thread)`);
        slot.settle({ ok: false, reason: msg.reason });
        this.#end(thread);
      }
    });
    // Always listened to: an unheard 'error' of a Worker is thrown in the main thread and ends
    // the process with a stack trace. A running job's own listener reports its failure.
    thread.on("error", (err: Error) => {
      if (!slot.served) {
        setupEnded();
        // One line, no stack: the user's module did not load, which runlet's frames do not explain.
        const reason = `the handler failed to load in an isolation thread: ${err.name || "Error"}: ${err.message}`;
        this.#failedToServe("handler-load", reason);
        slot.settle({ ok: false, reason });
      } else if (slot.life.is("idle")) this.#logger.error({ err }, "an idle isolation thread failed");
    });
    thread.once("exit", (code) => {
      setupEnded();
      slot.settle({ ok: false, reason: `the isolation thread exited (code ${code}) before it could serve` });
      slot.life.move("dead");
      this.#slots.delete(slot);
    });
    return slot;
  }

  /** Ends a thread that cannot serve; its exit is heard by its own listener. */
  #end(thread: Thread): void {
    settle(thread.terminate(), (err) => this.#logger.warn({ err }, "ending an isolation thread failed"));
  }

  /** Where the first thread's setup progress goes while the worker waits for it. */
  #onFirstProgress: ((text: string) => void) | undefined;

  /** A thread cannot serve (its handler did not load, or its setup failed): the worker is unfit. */
  #failedToServe(check: string, reason: string): void {
    if (this.#loadFailure !== undefined || this.#closed) return;
    this.#loadFailure = reason;
    this.#options.onUnfit(check, reason);
  }

  /**
   * The runner's start-up phase: spawns the first isolation thread (a warm thread has loaded
   * tsx, zod and the handler before the first job's clock runs) and waits for its setup;
   * `setupTimeoutMs` counts from here. Without a setup nothing is waited for: the first job finds
   * its thread loading.
   */
  async start(start: RunnerStart): Promise<SetupOutcome> {
    if (this.#first === undefined && !this.#closed) this.#first = this.#spawn();
    const first = this.#first;
    if (!this.#options.setup.present || first === undefined) return { ok: true, state: undefined };
    this.#onFirstProgress = (text) => start.progress(text);
    let unsubscribe: (() => void) | undefined;
    try {
      return await Promise.race([
        first.ready,
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
   * Runs teardown in every idle thread (its setup done, no job running), for at most
   * `withinMs`; a thread still running a job is ended by close() without it.
   */
  async teardown(withinMs: number): Promise<void> {
    if (!this.#options.setup.present) return;
    const { clock } = this.#options;
    const threads = [...this.#slots].filter((slot) => slot.life.is("idle")).map((slot) => slot.thread);
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

  /**
   * Runs `run` on one thread (an idle one, or a new one): a hard stop terminates the thread, and
   * each job then ends as its owner decides. Telemetry on: each plain job's handler span (its
   * hooks' `wrapHandler`) or the batch's spans travel with the run.
   */
  run(run: Run): RunHandle {
    const count = run.jobs.length;
    const each = (outcome: ExecuteOutcome): ExecuteOutcome[] => run.jobs.map(() => outcome);
    if (this.#loadFailure !== undefined) {
      return {
        started: Promise.resolve(Date.now()),
        outcomes: Promise.resolve(each(this.#loadFailureOutcome(this.#loadFailure))),
        abort: () => undefined,
        hardStop: async () => true,
      };
    }
    const runId = this.#nextRunId();
    const launchedAt = Date.now();
    for (const job of run.jobs) job.onLaunch(launchedAt);
    const launch = (trace: ThreadTrace | undefined, receive: TraceLink["receive"] | undefined): ThreadRun =>
      this.#launch(
        {
          type: "run",
          runId,
          batchId: run.batchId,
          jobs: run.jobs.map((job) => job.job),
          timeoutsMs: run.jobs.map((job) => job.timeoutMs),
          trace,
        },
        run.log,
        run.jobs,
        receive,
      );
    const onThread =
      run.batchId === undefined
        ? launchInJobSpans(run.jobs, launch)
        : launch(threadTrace(run.trace), run.trace?.receive);
    return {
      started: onThread.started,
      outcomes: onThread.end.then((end) => {
        if (end.kind === "killed") return "killed";
        if (end.kind !== "result") return each(end.outcome);
        return end.outcomes.length === count ? end.outcomes : each(this.#diedOutcome(0, undefined));
      }),
      abort: (reason, index) => onThread.abort(reason, index),
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
   * Sends `message` (a run) to an idle thread (or a new one) and relays what the thread answers to
   * the jobs' hooks until its result, a hard stop or the thread's exit; the thread then goes back
   * to the pool. `spans`: where the handler's spans go (telemetry on).
   */
  #launch(
    message: RunMessage,
    log: Logger,
    jobs: readonly RunJob[],
    spans: TraceLink["receive"] | undefined,
  ): ThreadRun {
    const { runId } = message;
    const slot = this.#freeSlot() ?? this.#spawn();
    const thread = slot.thread;
    slot.held = runId;
    if (slot.life.is("idle")) slot.life.to("busy");
    /** Ended once the end exists: the run is inert from then on, the thread may run another job. */
    const runEnd = new RunEnd();
    let settleEnd!: (end: ThreadEnd) => void;
    const end = new Promise<ThreadEnd>((resolve) => {
      settleEnd = resolve;
    });
    let killed = false;
    let markStarted!: (at: number) => void;
    const started = new Promise<number>((resolve) => {
      markStarted = resolve;
    });
    const send = (msg: ToThread): void => thread.postMessage(msg);
    const onMessage = (msg: FromThread): void => {
      if (msg.type === "started") markStarted(msg.at);
      else if (msg.type === "progress") jobs[msg.index]?.hooks.progress(msg.json);
      else if (msg.type === "streaming") jobs[msg.index]?.hooks.streaming?.();
      else if (msg.type === "spans") spans?.(msg.spans);
      else if (msg.type === "chunks") {
        const hooks = jobs[msg.index]?.hooks;
        const queued = hooks === undefined ? Promise.resolve() : hooks.chunks(msg.bodies, msg.bytes);
        // The credit goes either way, so the thread never stalls.
        settle(
          queued
            .catch((err: unknown) => log.error({ err }, "queueing this job's stream chunks failed"))
            .then(() => send({ type: "credit", seq: msg.seq })),
          (err) => log.error({ err }, "crediting this job's stream chunks failed"),
        );
      } else if (msg.type === "result") {
        runEnd.end();
        cleanup();
        // The thread goes back to the pool: busy → idle.
        slot.life.move("idle");
        settleEnd({ kind: "result", outcomes: msg.outcomes });
      }
    };
    let failure: Error | undefined;
    const onError = (err: Error): void => {
      failure = err;
      // A failure to load is the runner's to report (once, without a stack), not this job's.
      if (slot.served) log.error({ err }, "the isolation thread failed");
    };
    const onExit = (code: number): void => {
      runEnd.end();
      cleanup();
      markStarted(Date.now());
      // The pool keeps serving: warm a replacement now rather than on the next job's clock.
      if (!this.#closed && this.#loadFailure === undefined && this.#freeSlot() === undefined) this.#spawn();
      if (killed) settleEnd({ kind: "killed" });
      else if (this.#loadFailure !== undefined && !slot.served) {
        settleEnd({ kind: "failed", outcome: this.#loadFailureOutcome(this.#loadFailure) });
      } else settleEnd({ kind: "failed", outcome: this.#diedOutcome(code, failure) });
    };
    const cleanup = (): void => {
      slot.held = undefined;
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

  /** A slot that can take a run now, if any (none once the handler failed to load). */
  #freeSlot(): Slot | undefined {
    if (this.#loadFailure !== undefined || this.#closed) return undefined;
    let waiting: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot.life.is("idle")) return slot;
      if (waiting === undefined && slot.free) waiting = slot;
    }
    return waiting;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#slots].map((slot) => slot.thread.terminate()));
  }
}

/**
 * Launches a plain run inside each job's handler span (telemetry on: the jobs' hooks' `wrapHandler`,
 * each of which calls its run at once): the thread runs job `i` under `jobs[i]` of the trace, and
 * each span ends with the run. Without telemetry, as is.
 */
function launchInJobSpans(
  jobs: readonly RunJob[],
  launch: (trace: ThreadTrace | undefined, receive: TraceLink["receive"] | undefined) => ThreadRun,
): ThreadRun {
  const spans: SpanRef[] = [];
  let receive: TraceLink["receive"] | undefined;
  let ended!: (end: Promise<unknown>) => void;
  // Settles as the run's end does, once the run exists.
  const end = new Promise<unknown>((resolve) => {
    ended = resolve;
  });
  for (const job of jobs) {
    const wrap = job.hooks.wrapHandler;
    if (wrap === undefined) continue;
    let called = false;
    // The span's own promise settles with the run (the handler's outcome is the run's, not this).
    settle(
      wrap.call(job.hooks, job.log, (_log, link) => {
        called = true;
        if (link !== undefined) {
          spans.push(link.span);
          receive ??= link.receive;
        }
        return end;
      }),
      () => undefined,
    );
    if (!called) throw new Error("wrapHandler must call its run at once");
  }
  const trace: ThreadTrace | undefined =
    spans.length === jobs.length && spans.length > 0 ? { span: spans[0]!, jobs: spans } : undefined;
  const run = launch(trace, receive);
  ended(run.end);
  return run;
}
