import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { FITNESS_ENV } from "../protocol/index.js";
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
  /** Told when a worker that had started exits on its own (not stopped by the pool); it is replaced. */
  readonly onExit: (label: string, code: number | null, signal: NodeJS.Signals | null) => void;
  /**
   * Told once when a worker exits before it started (its handler did not load): the pool then
   * starts no replacement until `reload()`, since the same code would fail the same way.
   */
  readonly onStartFailed: (label: string, code: number | null, signal: NodeJS.Signals | null) => void;
  /** How long a stopped worker may finish its jobs before it is killed, in ms. @default 30_000 */
  readonly stopGraceMs?: number;
  /** Pause before replacing a started worker that exited on its own, in ms (a crashing handler must not spin). @default 1_000 */
  readonly restartDelayMs?: number;
  /** Given each worker process, spawned with an IPC channel (runlet dev's sidecars). @default no IPC channel */
  readonly ipc?: (child: ChildProcess) => void;
}

interface Member {
  readonly label: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  stopping: boolean;
  /** It logged `worker started`: its handler loaded. */
  started: boolean;
}

/** A worker's `worker started` line (platform mode: one JSON object a line). */
function isStartedLine(line: string): boolean {
  if (!line.startsWith("{")) return false;
  try {
    return (JSON.parse(line) as { message?: unknown }).message === "worker started";
  } catch {
    return false; // not a log line of the worker's: a handler's own output
  }
}

/**
 * The worker processes of `runlet dev`: `runlet start <handler>` children connected to the
 * harness. `reload()` starts fresh workers (new code) and gracefully stops the old ones, which
 * finish the jobs they hold; jobs still queued wait in the harness for the new workers.
 */
export class WorkerPool {
  readonly #options: WorkerPoolOptions;
  readonly #members = new Set<Member>();
  readonly #closed = new AbortController();
  #counter = 0;
  #closing: Promise<void> | undefined;
  /** A worker of the current code failed to start: no replacements until reload(). */
  #waitingForChange = false;

  constructor(options: WorkerPoolOptions) {
    this.#options = options;
  }

  /** Starts the pool's workers. */
  start(): void {
    for (let i = 0; i < this.#options.size; i++) this.#spawn();
  }

  /** Replaces every worker: new ones start now, the old ones stop taking jobs and finish theirs. */
  async reload(): Promise<void> {
    const old = [...this.#members];
    this.#waitingForChange = false;
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
    const child = spawn(
      process.execPath,
      [join(RUNLET_ROOT, "bin", "runlet.mjs"), "start", this.#options.handlerPath],
      {
        env: { ...inheritedEnv(), ...this.#options.envFor() },
        stdio:
          this.#options.ipc === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "ipc"],
      },
    );
    this.#options.ipc?.(child);
    const member: Member = {
      label,
      child,
      stopping: false,
      started: false,
      exited: new Promise((resolve) => child.once("close", () => resolve())),
    };
    this.#members.add(member);
    pipeLines(child, (line) => {
      if (!member.started && isStartedLine(line)) member.started = true;
      this.#options.onLine(label, line);
    });
    child.once("close", (code, signal) => {
      this.#members.delete(member);
      if (member.stopping || this.#closed.signal.aborted) return;
      if (!member.started) {
        // Its handler did not load (a syntax error, a half-saved file): restarting cannot help.
        if (!this.#waitingForChange) this.#options.onStartFailed(label, code, signal);
        this.#waitingForChange = true;
        return;
      }
      this.#options.onExit(label, code, signal);
      // Replace it (a refreshWorker job, a crash) without spinning.
      sleep(this.#options.restartDelayMs ?? 1_000, undefined, { signal: this.#closed.signal }).then(
        () => this.#spawn(),
        () => {
          // Aborted: the pool is closing, so no replacement.
        },
      );
    });
    child.once("error", (err) => this.#options.onLine(label, `could not start: ${err.message}`));
  }

  async #stop(member: Member): Promise<void> {
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
const FITNESS_NAMES: ReadonlySet<string> = new Set(Object.values(FITNESS_ENV));

/**
 * The CLI's environment without platform variables, so a worker sees only the harness's; the
 * fitness checks' thresholds (RUNPOD_MIN_MEMORY_GB, ...) pass through, being the user's settings.
 */
export function inheritedEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("RUNPOD_") || FITNESS_NAMES.has(k)) env[k] = v;
  }
  return env;
}
