import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import { type Clock, type ClockTimer, realClock } from "../../clock.js";
import { RESULT_POST_HEADERS } from "../../protocol/headers.js";
import { withQuery } from "../../protocol/urls.js";
import { USER_AGENT, VERSION } from "../../version.js";
import { HEARTBEAT_BOOTSTRAP, tsxApiUrl } from "../runner/thread-bootstrap.js";
import type { FromHeartbeat, HeartbeatWorkerData } from "./heartbeat-thread.js";
import { JobSlots } from "./job-slots.js";

/**
 * The heartbeat (docs/protocol.md, "Heartbeat") on its own thread, so a handler that blocks the
 * main thread does not stop the pings; the same thread is the in-process watchdog: it reads each
 * job's hard-stop time from the shared job table, and posts the timeout itself and kills the
 * process when the main thread cannot. The thread runs heartbeat-thread.ts, loaded by URL like an
 * isolation thread's entry: this folder's module from dist/ (or, from sources, through tsx), or
 * the file a bundle names (`heartbeatEntry`: `runlet build` writes heartbeat-thread.mjs beside
 * worker.mjs). A thread that dies resolves `died`: the worker can no longer be seen holding its
 * jobs, so it must stop taking them.
 */

/**
 * One held job's place in the heartbeat's job table ({@link Heartbeat.slot}): minted when the job
 * is admitted, released when it holds its slot no more. Off the platform (no heartbeat thread) a
 * job holds {@link NULL_SLOT}.
 */
export interface HeartbeatSlot {
  /** job-stop named the job: the pings leave it out, though it still holds its slot. */
  unlist(): void;
  /** The job is held no more. */
  release(): void;
  /**
   * Arms the watchdog: unless unwatched before `atMs`, the thread posts the job's timeout failure
   * (`timeoutMs` in its message; to the stream's job-done URL when `streaming`) and kills the process.
   */
  watch(atMs: number, timeoutMs: number, streaming: boolean): void;
  /** Disarms the watchdog. */
  unwatch(): void;
}

/** The slot of a job in a worker without a heartbeat thread: nothing to list, nothing to watch. */
export const NULL_SLOT: HeartbeatSlot = Object.freeze({
  unlist: () => undefined,
  release: () => undefined,
  watch: () => undefined,
  unwatch: () => undefined,
});

/** Where jobs get their heartbeat slots: the heartbeat, or its part before it started. */
export interface SlotSource {
  slot(jobId: string): HeartbeatSlot;
}

/** The heartbeat thread's module beside this one: heartbeat-thread.ts (sources) or .js (dist/). */
export function defaultHeartbeatEntryUrl(): string {
  const ext = import.meta.url.endsWith(".ts") ? "ts" : "js";
  return new URL(`./heartbeat-thread.${ext}`, import.meta.url).href;
}

/** What the watchdog posts for a job it finds holding the main thread past its time. */
export interface WatchdogReport {
  /** The job-done URL with {@link WATCH_ID_MARK} where the (URL-encoded) job id goes, `isStream=false`. */
  readonly doneUrl: string;
  /** The same with `isStream=true`, for a job that streams. */
  readonly streamDoneUrl: string;
  /** The failure body with {@link WATCH_TIMEOUT_MARK} where the job's time limit in ms goes. */
  readonly failureBody: string;
  /** The failure body of a watched job not yet past its time when another held the main thread. */
  readonly endedBody: string;
}

/** Stands for the job id in {@link WatchdogReport}'s URLs (encodeURIComponent leaves it as it is). */
export const WATCH_ID_MARK = "__runlet_job_id__";
/** Stands for the job's time limit in {@link WatchdogReport}'s body (JSON leaves it as it is). */
export const WATCH_TIMEOUT_MARK = "__runlet_timeout_ms__";
/** How often the watchdog looks at the job table, ms: it acts at most this late after a job's watch time. */
const WATCH_POLL_MS = 100;

/** Options of {@link Heartbeat}. */
export interface HeartbeatOptions {
  /** The thread's module (file URL). @default {@link defaultHeartbeatEntryUrl} */
  readonly entryUrl?: string;
  /** The ping URL with placeholders already substituted; undefined: no pings (watchdog only). */
  readonly pingUrl: string | undefined;
  readonly intervalMs: number;
  readonly apiKey: string | undefined;
  /**
   * Send no regular ping until {@link Heartbeat.beginPings}: a handler with `setup` is, like the
   * platform's Python SDK with a model loaded at import, not seen before it can take a job
   * (docs/protocol.md, "Heartbeat"). @default false
   */
  readonly holdPings?: boolean;
  /** Arm the watchdog (only when the worker may end the process), with what it posts. */
  readonly watchdog: WatchdogReport | undefined;
  readonly log: Logger;
  /** The worker's clock: the wait for the unhealthy ping's answer is bounded on it. @default real timers */
  readonly clock?: Clock;
}

/**
 * The heartbeat and watchdog thread, driven from the main thread. The jobs the pings name and the
 * watchdog's watches go through shared memory ({@link JobSlots}), so telling the thread about a
 * job wakes nothing; only the rare table growth, a very long id, the unhealthy ping and the stop
 * are messages.
 */
export class Heartbeat {
  readonly #thread: Thread;
  readonly #headers: Record<string, string>;
  readonly #intervalMs: number;
  readonly #slots: JobSlots;
  readonly #clock: Clock;
  #closed: Promise<void> | undefined;
  #unhealthy: Promise<void> | undefined;
  #unhealthySent: (() => void) | undefined;
  /** Why the thread is gone, once it died on its own. */
  #dead: string | undefined;
  /**
   * Resolves once, with why, when the thread ends or fails while the worker still needs it (never
   * after {@link Heartbeat.close}): a fact the worker's lifecycle hears.
   */
  readonly died: Promise<string>;

  constructor(options: HeartbeatOptions) {
    this.#headers = { "user-agent": USER_AGENT };
    this.#intervalMs = options.intervalMs;
    this.#clock = options.clock ?? realClock({ unref: false });
    if (options.apiKey !== undefined) this.#headers["authorization"] = options.apiKey;
    this.#slots = new JobSlots((message) => this.#thread.postMessage(message));
    const { watchdog } = options;
    const entryUrl = options.entryUrl ?? defaultHeartbeatEntryUrl();
    const data: HeartbeatWorkerData & { entryUrl: string; tsxApiUrl: string | undefined } = {
      runletRole: "heartbeat",
      entryUrl,
      tsxApiUrl: new URL(entryUrl).pathname.endsWith(".ts") ? tsxApiUrl() : undefined,
      pingUrl: options.pingUrl === undefined ? undefined : withQuery(options.pingUrl, {}),
      intervalMs: options.intervalMs,
      pingsHeld: options.holdPings === true,
      headers: this.#headers,
      version: `runlet/${VERSION}`,
      slots: this.#slots.buffer,
      watch:
        watchdog === undefined
          ? undefined
          : {
              ...watchdog,
              idMark: WATCH_ID_MARK,
              timeoutMark: WATCH_TIMEOUT_MARK,
              postHeaders: RESULT_POST_HEADERS,
              pollMs: WATCH_POLL_MS,
            },
    };
    this.#thread = new Thread(HEARTBEAT_BOOTSTRAP, { eval: true, workerData: data });
    this.#thread.on("message", (msg: FromHeartbeat) => {
      if (msg.type === "log") options.log[msg.level](msg.message);
      else if (msg.type === "unhealthy-sent") {
        if (msg.problem !== undefined) options.log.warn(`the unhealthy ping failed: ${msg.problem}`);
        this.#unhealthySent?.();
      }
    });
    let reportDeath!: (reason: string) => void;
    this.died = new Promise((resolve) => {
      reportDeath = resolve;
    });
    const died = (reason: string): void => {
      if (this.#closed !== undefined || this.#dead !== undefined) return;
      this.#dead = reason;
      // Nobody can send the unhealthy ping now: do not wait for it.
      this.#unhealthySent?.();
      reportDeath(reason);
    };
    this.#thread.on("error", (err) => {
      options.log.error({ err }, "the heartbeat thread failed");
      died(`the heartbeat thread failed: ${err.message}`);
    });
    this.#thread.on("exit", (code) => died(`the heartbeat thread exited (code ${code})`));
    // The beat must not keep a finished process alive.
    this.#thread.unref();
  }

  /** Starts the regular pings held by `holdPings` (start-up is done); nothing otherwise. */
  beginPings(): void {
    if (this.#closed === undefined && this.#dead === undefined)
      this.#thread.postMessage({ type: "begin-pings" });
  }

  /**
   * A held job's slot in the job table, owned by the job (active-job.ts): the pings name it from
   * now on (minted before its handler can run) until it is unlisted or released.
   */
  slot(jobId: string): HeartbeatSlot {
    const slots = this.#slots;
    slots.add(jobId);
    return {
      unlist: () => slots.unlist(jobId),
      release: () => slots.remove(jobId),
      watch: (atMs, timeoutMs, streaming) => slots.watch(jobId, atMs, timeoutMs, streaming),
      unwatch: () => slots.unwatch(jobId),
    };
  }

  /**
   * Pings once with `status=unhealthy&check=<check>&reason=<reason>` (docs/protocol.md, "Unfit workers") and stops
   * the regular beat. Resolves when the ping was answered or failed (bounded by a few intervals);
   * later calls return the first call's promise.
   */
  unhealthy(check: string, reason: string): Promise<void> {
    this.#unhealthy ??= (async () => {
      if (this.#closed !== undefined || this.#dead !== undefined) return;
      let timer: ClockTimer | undefined;
      await new Promise<void>((resolve) => {
        this.#unhealthySent = resolve;
        // Three attempts of at most two intervals each, plus their pauses.
        timer = this.#clock.setTimeout(resolve, this.#intervalMs * 6 + 2_000);
        this.#thread.postMessage({ type: "unhealthy", check, reason });
      });
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    })();
    return this.#unhealthy;
  }

  /** Stops the thread. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#thread.postMessage({ type: "stop" });
      await this.#thread.terminate();
    })();
    return this.#closed;
  }
}
