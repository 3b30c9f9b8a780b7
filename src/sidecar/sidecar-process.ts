import { type ChildProcess, spawn } from "node:child_process";
import { connect } from "node:net";
import pino, { type Logger } from "pino";
import type { Clock } from "../clock.js";
import { MAX_TIMER_MS } from "../duration.js";
import { RunletError } from "../errors.js";
import { HttpTransport } from "../http/transport.js";
import { onAbort } from "../linked-signal.js";
import { settle } from "../task-sink.js";
import { USER_AGENT } from "../version.js";
import { sleep } from "../wait.js";
import { GUARD_SOURCE } from "./guard.js";
import type { SidecarSettings } from "./options.js";
import { redactCommand } from "./redact-command.js";

/**
 * One sidecar process under supervision (docs/models.md, "Sidecars"): started through the guard
 * (guard.ts) in its own process group, its output turned into the worker's log lines, waited for
 * while it lives, and stopped with SIGTERM then SIGKILL. Its exit, whenever it comes, is
 * {@link SidecarProcess.exited}; the caller decides what an exit means.
 */

/** How a sidecar ended. */
export interface SidecarExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Its last output lines (at most {@link LAST_LINES}, each cut to {@link LAST_LINE_CHARS}). */
  readonly lastLines: readonly string[];
}

/** Output lines kept for a failure's reason. */
export const LAST_LINES = 20;
/** Characters kept of each of those lines. */
export const LAST_LINE_CHARS = 500;
/** A longer output line is logged in pieces of this many characters (a line never grows memory without bound). */
export const MAX_LINE_CHARS = 16_384;
/** One readiness probe's own bound, in ms (real time: it bounds a socket, not the schedule). */
const PROBE_TIMEOUT_MS = 2_000;
/** After SIGTERM and the grace, the guard sends SIGKILL; the worker sends it itself this much later. */
const KILL_SLACK_MS = 2_000;

/** After the sidecar exits, how long its output may still take to arrive, in ms. */
const OUTPUT_DRAIN_MS = 1_000;

/** Environment names whose values are scrubbed from the sidecar's lines and its logged command. */
const SECRET_NAME = /key|token|secret|password|passwd|credential/i;
/** Shortest secret-named value scrubbed: of the sidecar's own `env`, and of the environment it inherits. */
const MIN_OWN_SECRET_CHARS = 4;
const MIN_INHERITED_SECRET_CHARS = 8;

/**
 * Bytes the worker's log output may hold unwritten (its reader stalled) before the sidecar's
 * lines are dropped and counted instead of queued: a chatty server beside a stalled log must not
 * grow the worker without bound. The lines still reach the last lines a failure quotes.
 */
export const LOG_BACKLOG_BYTES = 4_194_304; // 4 MiB
/** The same bound for an output that queues lines as objects (the pretty printer of local runs), in lines. */
export const LOG_BACKLOG_LINES = 4_096;

/** What the backlog of the logger's output is read from (a Writable's fields; absent on others). */
interface LogOutput {
  readonly writableLength?: unknown;
  readonly writableObjectMode?: unknown;
}

/** "exited with code 1" / "was killed by SIGKILL". */
export function describeExit(exit: Pick<SidecarExit, "code" | "signal">): string {
  return exit.signal === null ? `exited with code ${exit.code}` : `was killed by ${exit.signal}`;
}

/** The reason a failure carries: what happened, then the last lines (if any). */
function withLastLines(reason: string, lines: readonly string[]): string {
  return lines.length === 0 ? reason : `${reason}; its last lines: ${lines.join(" | ")}`;
}

/** Options of {@link SidecarProcess}. */
export interface SidecarProcessOptions {
  readonly settings: SidecarSettings;
  /** The worker's logger; each output line is logged on a child with `{ sidecar: name, stream }`. */
  readonly log: Logger;
  /** Times the readiness probes' pauses and `readyTimeoutMs`. */
  readonly clock: Clock;
  /** The environment the sidecar's own `env` is added to. */
  readonly baseEnv: Readonly<Record<string, string | undefined>>;
}

/** A started sidecar (see the file's summary). */
export class SidecarProcess {
  readonly settings: SidecarSettings;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #child: ChildProcess;
  readonly #lastLines: string[] = [];
  readonly #secrets: string[];
  /** Where the logger writes (the worker's stdout, usually): its backlog decides {@link LOG_BACKLOG_BYTES}. */
  readonly #output: LogOutput | undefined;
  /** Lines not logged since the last report, for the log's backlog. */
  #dropped = 0;
  #stopping: Promise<SidecarExit> | undefined;
  #exit: SidecarExit | undefined;
  /** Resolves when the sidecar (its guard) has exited, for whatever reason. Never rejects. */
  readonly exited: Promise<SidecarExit>;

  constructor(options: SidecarProcessOptions) {
    const { settings, log, clock, baseEnv } = options;
    this.settings = settings;
    this.#clock = clock;
    this.#log = log.child({ sidecar: settings.name });
    this.#output = (log as unknown as Record<symbol, LogOutput | undefined>)[pino.symbols.streamSym];
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(baseEnv)) if (v !== undefined) env[k] = v;
    Object.assign(env, settings.env);
    const secrets = new Set<string>();
    for (const [k, v] of Object.entries(env)) {
      const min = Object.hasOwn(settings.env, k) ? MIN_OWN_SECRET_CHARS : MIN_INHERITED_SECRET_CHARS;
      if (SECRET_NAME.test(k) && v.length >= min) secrets.add(v);
    }
    this.#secrets = [...secrets].sort((a, b) => b.length - a.length);
    const [program, ...args] = settings.command;
    this.#child = spawn(
      process.execPath,
      ["-e", GUARD_SOURCE, String(settings.stopGraceMs), program!, ...args],
      {
        env,
        ...(settings.cwd === undefined ? {} : { cwd: settings.cwd }),
        // A new session and process group, led by the guard: stopping it reaches everything the
        // sidecar started, and a Ctrl-C meant for `runlet dev` does not reach it directly.
        detached: true,
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    this.exited = new Promise((resolve) => {
      this.#child.once("exit", (code, signal) => {
        // Whatever the sidecar left behind in its group (its own children) goes with it.
        this.#killGroup("SIGKILL");
        // Its last words may still be in the pipes: wait for them to end (not for ever: a
        // grandchild that escaped the group could hold them open).
        const closed = new Promise<void>((done) => {
          const timer = setTimeout(done, OUTPUT_DRAIN_MS);
          this.#child.once("close", () => {
            clearTimeout(timer);
            done();
          });
        });
        settle(
          closed.then(() => {
            this.#reportDropped();
            this.#exit = { code, signal, lastLines: [...this.#lastLines] };
            resolve(this.#exit);
          }),
          (err) => this.#log.error({ err }, "recording the sidecar's exit failed"),
        );
      });
      this.#child.once("error", (err) => {
        // The guard itself could not start (node not found, no processes left).
        this.#line("stderr", `could not start: ${err.message}`);
        this.#exit = { code: null, signal: null, lastLines: [...this.#lastLines] };
        resolve(this.#exit);
      });
    });
    // The stdin pipe is the guard's life line; an error on it (the guard gone) needs no handling.
    this.#child.stdin?.on("error", () => {});
    this.#pipe("stdout");
    this.#pipe("stderr");
    this.#log.info(
      { command: redactCommand(settings.command, this.#secrets), pid: this.#child.pid },
      `starting sidecar "${settings.name}"`,
    );
  }

  /** The guard's process id (the process group's id), once spawned. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Its exit, once it has exited. */
  get exit(): SidecarExit | undefined {
    return this.#exit;
  }

  /** True once {@link stop} was called. */
  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** The reason text for an exit: `sidecar "llm" exited with code 1; its last lines: ...`. */
  reasonFor(exit: SidecarExit, when = ""): string {
    return withLastLines(`sidecar "${this.settings.name}" ${describeExit(exit)}${when}`, exit.lastLines);
  }

  /**
   * Resolves once the sidecar answers (see `ready`); rejects with RUNLET_SIDECAR_FAILED at once
   * when it exits first (its exit and last lines in the message), when `readyTimeoutMs` passes on
   * the clock, or when `signal` aborts.
   */
  async waitReady(signal: AbortSignal): Promise<void> {
    const { readyTimeoutMs, readyIntervalMs, name } = this.settings;
    const started = this.#clock.now();
    const giveUp = new AbortController();
    const unsubscribe = onAbort(signal, () => giveUp.abort(signal.reason));
    settle(
      this.exited.then((exit) => {
        giveUp.abort(new RunletError("RUNLET_SIDECAR_FAILED", this.reasonFor(exit, " while starting")));
      }),
      (err) => giveUp.abort(err),
    );
    const timeout = this.#clock.setTimeout(() => {
      giveUp.abort(
        new RunletError(
          "RUNLET_SIDECAR_FAILED",
          withLastLines(
            `sidecar "${name}" did not answer within ${readyTimeoutMs} ms (readyTimeoutMs) at ${describeReady(this.settings)}`,
            this.#lastLines,
          ),
        ),
      );
    }, readyTimeoutMs);
    try {
      for (;;) {
        if (giveUp.signal.aborted) throw giveUp.signal.reason;
        if (await probe(this.settings, giveUp.signal)) break;
        await sleep(readyIntervalMs, giveUp.signal, this.#clock);
      }
      if (giveUp.signal.aborted) throw giveUp.signal.reason;
      this.#log.info({ readyMs: this.#clock.now() - started }, `sidecar "${name}" is ready`);
    } finally {
      this.#clock.clearTimeout(timeout);
      unsubscribe();
    }
  }

  /**
   * Stops it: closes the guard's stdin (SIGTERM to its group, SIGKILL after `stopGraceMs`), and
   * sends SIGKILL to the group itself a little later should the guard not have. Idempotent.
   */
  stop(): Promise<SidecarExit> {
    this.#stopping ??= (async () => {
      if (this.#exit !== undefined) return this.#exit;
      this.#log.info({ graceMs: this.settings.stopGraceMs }, `stopping sidecar "${this.settings.name}"`);
      this.#child.stdin?.end();
      // Within a timer's reach, even for the longest stopGraceMs the options allow.
      const killAfterMs = Math.min(MAX_TIMER_MS, this.settings.stopGraceMs + KILL_SLACK_MS);
      const timer = setTimeout(() => this.#killGroup("SIGKILL"), killAfterMs);
      try {
        const exit = await this.exited;
        // Its exit status says little here: after a stop the guard ends the whole group, itself too.
        this.#log.info(`sidecar "${this.settings.name}" stopped`);
        return exit;
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.#stopping;
  }

  #killGroup(signal: NodeJS.Signals): void {
    const pid = this.#child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // ESRCH: the group is already empty, which is what was wanted.
    }
  }

  #pipe(stream: "stdout" | "stderr"): void {
    const source = this.#child[stream];
    if (source === null) return;
    let pending = "";
    source.setEncoding("utf8");
    // A secret is scrubbed before a line is cut into pieces, so no cut splits one; an unterminated
    // line is cut only while it holds more than a piece and the longest secret.
    const longest = this.#secrets[0]?.length ?? 0;
    source.on("data", (chunk: string) => {
      pending += chunk;
      let at = pending.indexOf("\n");
      while (at !== -1) {
        this.#pieces(stream, this.#scrub(pending.slice(0, at)), true);
        pending = pending.slice(at + 1);
        at = pending.indexOf("\n");
      }
      if (pending.length > MAX_LINE_CHARS + longest)
        pending = this.#pieces(stream, this.#scrub(pending), false);
    });
    source.on("end", () => {
      if (pending !== "") this.#pieces(stream, this.#scrub(pending), true);
      pending = "";
    });
    source.on("error", (err) => this.#log.warn({ err }, `reading the sidecar's ${stream} failed`));
  }

  /** `text` with the secrets replaced. */
  #scrub(text: string): string {
    let out = text;
    for (const secret of this.#secrets) if (out.includes(secret)) out = out.replaceAll(secret, "[redacted]");
    return out;
  }

  /**
   * Logs `text` in pieces of {@link MAX_LINE_CHARS}; all of it when `whole`, else the pieces that
   * leave at most one piece and the longest secret unlogged, which it gives back.
   */
  #pieces(stream: "stdout" | "stderr", text: string, whole: boolean): string {
    const keep = whole ? 0 : MAX_LINE_CHARS + (this.#secrets[0]?.length ?? 0);
    let rest = text;
    while (rest.length > MAX_LINE_CHARS && rest.length > keep) {
      this.#line(stream, rest.slice(0, MAX_LINE_CHARS));
      rest = rest.slice(MAX_LINE_CHARS);
    }
    if (whole) this.#line(stream, rest);
    return whole ? "" : rest;
  }

  #line(stream: "stdout" | "stderr", raw: string): void {
    let line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    line = this.#scrub(line);
    if (line.trim() === "") return;
    this.#lastLines.push(line.length > LAST_LINE_CHARS ? `${line.slice(0, LAST_LINE_CHARS)}…` : line);
    if (this.#lastLines.length > LAST_LINES) this.#lastLines.shift();
    if (this.#backlogged()) {
      this.#dropped++;
      return;
    }
    this.#reportDropped();
    this.#log.info({ stream }, line);
  }

  /** True while the log's output holds more unwritten than {@link LOG_BACKLOG_BYTES} (or lines). */
  #backlogged(): boolean {
    const waiting = this.#output?.writableLength;
    if (typeof waiting !== "number") return false;
    return waiting >= (this.#output?.writableObjectMode === true ? LOG_BACKLOG_LINES : LOG_BACKLOG_BYTES);
  }

  /** One line for the lines dropped since the last report, if any (at the sidecar's exit even if still backlogged). */
  #reportDropped(): void {
    if (this.#dropped === 0) return;
    const droppedLines = this.#dropped;
    this.#dropped = 0;
    this.#log.warn(
      { droppedLines },
      `sidecar "${this.settings.name}": ${droppedLines} lines of its output were not logged: the worker's log output was not draining (over ${LOG_BACKLOG_BYTES} bytes or ${LOG_BACKLOG_LINES} lines waiting)`,
    );
  }
}

/** Where readiness is checked, for messages. */
function describeReady(settings: SidecarSettings): string {
  return "url" in settings.ready ? settings.ready.url : `127.0.0.1:${settings.ready.port}`;
}

/**
 * One readiness probe: true when the sidecar answered as `ready` asks. Never rejects. `signal` is
 * watched through onAbort (one listener however many probes run), not handed to the request: a
 * listener per probe piled up on the wait's signal (MaxListenersExceededWarning after 11 probes).
 */
/** The readiness probes' HTTP (src/http/transport.ts), made on the first URL probe. */
let probeHttp: HttpTransport | undefined;
/** Most of a probe's answer read, bytes: its status is the answer. */
const PROBE_MAX_BYTES = 65_536;

function probe(settings: SidecarSettings, signal: AbortSignal): Promise<boolean> {
  const ready = settings.ready;
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    let unsubscribe: (() => void) | undefined;
    let destroy: (() => void) | undefined;
    let settled = false;
    const finish = (ok: boolean): void => {
      if (settled) return;
      settled = true;
      unsubscribe?.();
      destroy?.();
      resolve(ok);
    };
    if ("port" in ready) {
      const socket = connect({ host: "127.0.0.1", port: ready.port });
      destroy = () => socket.destroy();
      socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(false));
      socket.once("connect", () => finish(true));
      socket.once("error", () => finish(false));
      socket.once("close", () => finish(false));
    } else {
      // Through the worker's one transport: no key, no redirect followed (a 3xx is not ready),
      // each probe on a connection of its own, the whole probe within PROBE_TIMEOUT_MS.
      probeHttp ??= new HttpTransport({ keepAlive: false, userAgent: USER_AGENT });
      const probing = new AbortController();
      destroy = () => probing.abort(new Error("probe ended"));
      settle(
        probeHttp
          .request("GET", ready.url, {
            signal: probing.signal,
            answerTimeoutMs: PROBE_TIMEOUT_MS,
            answerBodyMs: PROBE_TIMEOUT_MS,
            maxAnswerBytes: PROBE_MAX_BYTES,
            redirects: "none",
            abortBody: true,
          })
          .then((answer) => finish(answer.status >= 200 && answer.status < 300)),
        // A failed probe is a "not ready yet".
        () => finish(false),
      );
    }
    unsubscribe = onAbort(signal, () => finish(false));
  });
}
