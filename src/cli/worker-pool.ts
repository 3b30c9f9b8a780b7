import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { type StartupUpdate, startupUpdateOfRecord } from "../harness/fleet/worker-startup.js";
import { FITNESS_ENV } from "../protocol/index.js";
import { settle } from "../task-sink.js";
import { sleep } from "../wait.js";
import { INIT_TIMEOUT_ENV } from "../worker/startup-budget.js";
import { parseLogLine } from "./log-line.js";
import { RUNLET_ROOT } from "./paths.js";

/** Options of {@link WorkerPool}. */
export interface WorkerPoolOptions {
  /** The handler module each worker runs (`runlet start <handler>`). */
  readonly handlerPath: string;
  /** Worker processes to keep running. */
  readonly size: number;
  /** The platform environment for a new worker (a fresh pod id each call). */
  readonly envFor: () => Record<string, string>;
  /** Receives each line a worker prints, with the worker's label. */
  readonly onLine: (label: string, line: string) => void;
  /**
   * Told when a worker that was ready exits on its own (not stopped by the pool); it is replaced
   * after `delayMs` (see `restartDelayMs`).
   */
  readonly onExit: (
    label: string,
    code: number | null,
    signal: NodeJS.Signals | null,
    delayMs: number,
  ) => void;
  /**
   * Told once when a worker exits before it was ready: its handler did not load (`loaded` false),
   * or its start-up failed (an unfit worker, a failed setup: `unfit` holds the reason it logged).
   * The pool then starts no replacement until `reload()`, since the same code would fail the same way.
   */
  readonly onStartFailed: (failure: StartFailure) => void;
  /** Told of each start-up step a worker reports in its log lines, and of its exit (`runlet dev` passes them to the harness). */
  readonly onStartup?: (label: string, podId: string, update: StartupUpdate) => void;
  /**
   * Told of each worker the pool is about to stop (a reload, close), by its pod id, before the
   * worker is signalled: `runlet dev` retires it in the harness (`Harness.retireWorker`), so no job
   * is handed to it from then on; a job sent meanwhile waits for a new worker.
   */
  readonly onRetire?: (label: string, podId: string) => void;
  /** How long a stopped worker may finish its jobs before it is killed, in ms. @default 30_000 */
  readonly stopGraceMs?: number;
  /**
   * Pause before replacing a ready worker that exited on its own, in ms; it doubles with each
   * such exit in a row (up to {@link MAX_RESTART_DELAY_MS}) until `reload()`, so a worker that
   * keeps dying does not spin. @default 1_000
   */
  readonly restartDelayMs?: number;
  /** Given each worker process, spawned with an IPC channel (runlet dev's sidecars). @default no IPC channel */
  readonly ipc?: (child: ChildProcess) => void;
}

/** The longest pause before replacing a worker that exited, ms. */
export const MAX_RESTART_DELAY_MS = 30_000;

/** A worker that exited before it was ready. */
export interface StartFailure {
  readonly label: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** It logged `worker started`: its handler loaded. */
  readonly loaded: boolean;
  /** The unfitness it logged (`check`: `reason`), when it found itself unfit. */
  readonly unfit?: { readonly check: string; readonly reason: string };
}

interface Member {
  readonly label: string;
  readonly podId: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  stopping: boolean;
  /** Its stop (one SIGTERM, a SIGKILL past the grace), shared by every caller that asks for it. */
  stopped: Promise<void> | undefined;
  /** It logged `worker started`: its handler loaded. */
  started: boolean;
  /** It logged `worker ready`: its start-up (health check, setup) is done. */
  ready: boolean;
  /** The unfitness it logged, if any. */
  unfit: { check: string; reason: string } | undefined;
}

/**
 * The worker processes of `runlet dev`: `runlet start <handler>` children connected to the
 * harness. `reload()` starts fresh workers (new code) and gracefully stops the old ones, which
 * finish the jobs they hold; jobs still queued, and jobs sent from then on, wait in the harness for
 * the new workers (each old one is retired through `onRetire` before it is signalled).
 */
export class WorkerPool {
  readonly #options: WorkerPoolOptions;
  readonly #members = new Set<Member>();
  readonly #closed = new AbortController();
  #counter = 0;
  #closing: Promise<void> | undefined;
  /** A worker of the current code failed to start: no replacements until reload(). */
  #waitingForChange = false;
  /** Ready workers that exited on their own in a row since the last reload: the restart pause doubles. */
  #exitsInARow = 0;

  constructor(options: WorkerPoolOptions) {
    this.#options = options;
  }

  /** Starts the pool's workers. */
  start(): void {
    for (let i = 0; i < this.#options.size; i++) this.#spawn();
  }

  /**
   * Replaces every worker: new ones start now; the old ones are retired (`onRetire`: no new job
   * reaches them), then stop taking jobs and finish theirs.
   */
  async reload(): Promise<void> {
    const old = [...this.#members];
    this.#waitingForChange = false;
    this.#exitsInARow = 0;
    this.start();
    await Promise.all(old.map((m) => this.#stop(m)));
  }

  /** The labels of the running workers. */
  labels(): string[] {
    return [...this.#members].filter((m) => !m.stopping).map((m) => m.label);
  }

  /** Stops every worker (SIGTERM, then SIGKILL after the grace period). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed.abort();
      await Promise.all([...this.#members].map((m) => this.#stop(m)));
    })();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #spawn(): void {
    if (this.#closed.signal.aborted) return;
    const label = `w${++this.#counter}`;
    const env = this.#options.envFor();
    const podId = env["RUNPOD_POD_ID"] ?? label;
    const child = spawn(
      process.execPath,
      [join(RUNLET_ROOT, "bin", "runlet.mjs"), "start", this.#options.handlerPath],
      {
        env: { ...inheritedEnv(), ...env },
        stdio:
          this.#options.ipc === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "ipc"],
      },
    );
    this.#options.ipc?.(child);
    const member: Member = {
      label,
      podId,
      child,
      stopping: false,
      stopped: undefined,
      started: false,
      ready: false,
      unfit: undefined,
      exited: new Promise((resolve) => child.once("close", () => resolve())),
    };
    this.#members.add(member);
    this.#options.onStartup?.(label, podId, { type: "starting" });
    pipeLines(child, (line) => {
      this.#follow(member, line);
      this.#options.onLine(label, line);
    });
    child.once("close", (code, signal) => {
      this.#members.delete(member);
      this.#options.onStartup?.(label, podId, { type: "exited" });
      if (member.stopping || this.#closed.signal.aborted) return;
      if (!member.ready) {
        // Its handler did not load (a syntax error, a half-saved file), or its start-up failed (an
        // unfit worker, a failed setup): restarting the same code cannot help.
        if (!this.#waitingForChange) {
          this.#options.onStartFailed({
            label,
            code,
            signal,
            loaded: member.started,
            ...(member.unfit === undefined ? {} : { unfit: member.unfit }),
          });
        }
        this.#waitingForChange = true;
        return;
      }
      this.#exitsInARow++;
      const base = this.#options.restartDelayMs ?? 1_000;
      const delayMs = Math.min(MAX_RESTART_DELAY_MS, base * 2 ** Math.min(this.#exitsInARow - 1, 16));
      this.#options.onExit(label, code, signal, delayMs);
      // Replace it (a refreshWorker job, a crash) without spinning.
      settle(
        sleep(delayMs, this.#closed.signal).then((waited) => {
          // Aborted: the pool is closing, so no replacement.
          if (waited) this.#spawn();
        }),
        (err) =>
          this.#options.onLine(
            label,
            `could not start its replacement: ${err instanceof Error ? err.message : String(err)}`,
          ),
      );
    });
    child.once("error", (err) => this.#options.onLine(label, `could not start: ${err.message}`));
  }

  /** Follows a worker's start-up through its log lines (platform mode: one JSON object a line). */
  #follow(member: Member, line: string): void {
    if (member.ready) return;
    const record = parseLogLine(line);
    if (record === undefined) return;
    if (record["message"] === "worker started") member.started = true;
    if (record["code"] === "RUNLET_WORKER_UNFIT") {
      member.unfit = { check: String(record["check"] ?? ""), reason: String(record["reason"] ?? "") };
    }
    const update = startupUpdateOfRecord(record);
    if (update === undefined) return;
    if (update.type === "ready") member.ready = true;
    this.#options.onStartup?.(member.label, member.podId, update);
  }

  /**
   * Stops `member` once, however often it is asked (a second save, then close()): a worker is sent
   * SIGTERM once, since a second SIGTERM means "exit now" and would drop the job it is finishing,
   * which then ran again on the new code (issue 51, item 5).
   */
  #stop(member: Member): Promise<void> {
    member.stopped ??= this.#stopOnce(member);
    return member.stopped;
  }

  async #stopOnce(member: Member): Promise<void> {
    // Retired before it is signalled: from here on, no job is handed to it (not even in the moment
    // its last take stays open while it stops: take-loop.ts, TAKE_SETTLE_MS).
    if (!member.stopping) this.#options.onRetire?.(member.label, member.podId);
    member.stopping = true;
    if (member.child.exitCode === null && member.child.signalCode === null) member.child.kill("SIGTERM");
    const timer = setTimeout(() => member.child.kill("SIGKILL"), this.#options.stopGraceMs ?? 30_000);
    try {
      await member.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Hands each line a child prints (stdout and stderr) to `onLine`, a last unterminated one included. */
export function pipeLines(child: ChildProcess, onLine: (line: string) => void): void {
  for (const stream of [child.stdout, child.stderr]) {
    let pending = "";
    stream?.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) onLine(line);
    });
    stream?.on("end", () => {
      if (pending !== "") onLine(pending);
    });
  }
}

/** The fitness variables a worker does take from the CLI's environment (docs/fitness.md). */
/** The RUNPOD_* variables that are the user's settings for the worker, not the platform's wiring. */
const USER_SETTINGS: ReadonlySet<string> = new Set([...Object.values(FITNESS_ENV), INIT_TIMEOUT_ENV]);

/**
 * The CLI's environment (`source`) without platform variables, so a worker sees only the
 * harness's; the user's settings pass through: the fitness checks' thresholds
 * (RUNPOD_MIN_MEMORY_GB, ...) and the start-up budget (RUNPOD_INIT_TIMEOUT).
 */
export function inheritedEnv(source: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(source)) {
    if (!k.startsWith("RUNPOD_") || USER_SETTINGS.has(k)) env[k] = v;
  }
  return env;
}
