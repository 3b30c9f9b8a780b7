import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import { RESULT_POST_HEADERS, withQuery } from "../protocol/index.js";
import { USER_AGENT, VERSION } from "../version.js";
import { JobSlots, SLOT_FLAGS, SLOT_LAYOUT } from "./job-slots.js";

/**
 * The heartbeat (docs/protocol.md, "Heartbeat") on its own thread, so a handler that blocks the main thread
 * does not stop the pings; the same thread is the in-process watchdog: it reads each job's
 * hard-stop time from the shared job table, and posts the timeout itself and kills the process
 * when the main thread cannot.
 *
 * The thread is plain JavaScript evaluated from a string, so it starts the same way from
 * TypeScript sources, the CLI and a bundle (no file to find, no loader needed). It is kept tiny
 * because every thread has its own heap: it talks HTTP through node:http(s), not `fetch`,
 * whose undici would add ~12 MiB to an idle worker's memory.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { pingUrl, intervalMs, headers, version, watchdog, layout, flags, watch } = workerData;

// One request, body drained; resolves { status } or rejects on a network fault or the timeout.
function send(url, { method = "GET", headers, body, timeoutMs }) {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const lib = target.protocol === "https:" ? require("node:https") : require("node:http");
    const req = lib.request(target, { method, headers }, (res) => {
      res.on("error", fail);
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode });
      });
      res.resume();
    });
    const timer = setTimeout(() => req.destroy(new Error("timed out after " + timeoutMs + " ms")), timeoutMs);
    function fail(err) {
      clearTimeout(timer);
      reject(err);
    }
    req.on("error", fail);
    req.end(body);
  });
}
let stopped = false;
let timer;
let watchTimer;
let beat = Promise.resolve();
let firing = false;
const report = (level, message, extra) => parentPort.postMessage({ type: "log", level, message, extra });

// The job table the main thread writes (job-slots.ts): read slot by slot under each slot's seqlock.
let table = views(workerData.slots);
const longIds = new Map();
const decoder = new TextDecoder();
function views(buffer) {
  return { i32: new Int32Array(buffer), f64: new Float64Array(buffer), u8: new Uint8Array(buffer), count: buffer.byteLength / layout.slotBytes };
}
function readSlot(t, slot) {
  const base = slot * layout.slotBytes;
  for (let attempt = 0; attempt < 100; attempt++) {
    const seq = Atomics.load(t.i32, (base + layout.seq) >> 2);
    if (seq % 2 === 1) continue;
    const f = t.i32[(base + layout.flags) >> 2];
    if ((f & flags.used) === 0) {
      if (Atomics.load(t.i32, (base + layout.seq) >> 2) === seq) return undefined;
      continue;
    }
    const generation = t.i32[(base + layout.generation) >> 2];
    const idBytes = t.i32[(base + layout.idBytes) >> 2];
    // TextDecoder reads no shared memory: copy the bytes out first.
    const raw = (f & flags.longId) === 0 ? t.u8.slice(base + layout.id, base + layout.id + Math.max(0, Math.min(idBytes, layout.slotBytes - layout.id))) : undefined;
    const watchAt = t.f64[(base + layout.watchAt) >> 3];
    const timeoutMs = t.f64[(base + layout.timeoutMs) >> 3];
    if (Atomics.load(t.i32, (base + layout.seq) >> 2) !== seq) continue;
    let id;
    if (raw !== undefined) id = decoder.decode(raw);
    else {
      const long = longIds.get(slot);
      // The long id's message has not arrived yet: leave the slot out until it has.
      if (long === undefined || long.generation !== generation) return undefined;
      id = long.id;
    }
    return { id, flags: f, watchAt, timeoutMs };
  }
  // The main thread kept rewriting this slot: it is not stuck, so the slot is read next time.
  return undefined;
}
function jobs() {
  const t = table;
  const out = [];
  for (let slot = 0; slot < t.count; slot++) {
    const job = readSlot(t, slot);
    if (job !== undefined) out.push(job);
  }
  return out;
}
function listedIds() {
  return jobs().filter((j) => (j.flags & flags.listed) !== 0).map((j) => j.id);
}

async function ping() {
  const url = new URL(pingUrl);
  const jobIds = listedIds();
  if (jobIds.length > 0) url.searchParams.set("job_id", jobIds.join(","));
  url.searchParams.set("runpod_version", version);
  try {
    const res = await send(url, { headers, timeoutMs: intervalMs * 2 });
    return res.status === 429 || res.status >= 500 ? "HTTP " + res.status : undefined;
  } catch (err) {
    return String(err && err.message ? err.message : err);
  }
}

async function loop() {
  while (!stopped) {
    beat = ping();
    const problem = await beat;
    if (stopped) break;
    // A refused ping is retried once soon, then the regular beat goes on.
    let wait = intervalMs;
    if (problem !== undefined) {
      report("warn", "heartbeat ping failed: " + problem);
      wait = Math.max(50, Math.floor(intervalMs / 4));
    }
    await new Promise((resolve) => { timer = setTimeout(resolve, wait); });
  }
}

// Every watch.pollMs: a watched job past its time holds the main thread (which would have
// unwatched it), so the thread posts that job's timeout failure itself and ends the process.
function checkWatches() {
  if (firing || stopped) return;
  const now = Date.now();
  const due = jobs().find((j) => (j.flags & flags.watched) !== 0 && j.watchAt <= now);
  if (due !== undefined) {
    firing = true;
    fire(due);
  }
}

async function fire(job) {
  const id = job.id;
  const url = ((job.flags & flags.streaming) !== 0 ? watch.streamDoneUrl : watch.doneUrl).split(watch.idMark).join(encodeURIComponent(id));
  const body = watch.failureBody.split(watch.timeoutMark).join(String(job.timeoutMs));
  const postHeaders = { ...headers, ...watch.postHeaders, "x-request-id": id };
  report("error", "job " + id + " ignored its deadline and holds the main thread; reporting it from the watchdog and exiting");
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const res = await send(url, { method: "POST", headers: postHeaders, body, timeoutMs: 5000 });
      if (res.status < 500 && res.status !== 429) break;
    } catch {
      // Network fault: try again shortly; the process is exiting either way.
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + 1)));
  }
  // process.exit() would end only this thread; the main thread is stuck, so end the process.
  process.kill(process.pid, "SIGKILL");
}

// docs/protocol.md, "Unfit workers": one unhealthy ping (a retry only if it did not arrive), after any ping in
// flight so nothing follows it; the regular beat stops for good.
async function unhealthy(check, reason) {
  stopped = true;
  clearTimeout(timer);
  await beat;
  if (!pingUrl) return "no ping URL";
  const url = new URL(pingUrl);
  url.searchParams.set("status", "unhealthy");
  url.searchParams.set("check", check);
  url.searchParams.set("reason", reason);
  const jobIds = listedIds();
  if (jobIds.length > 0) url.searchParams.set("job_id", jobIds.join(","));
  url.searchParams.set("runpod_version", version);
  let problem;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const res = await send(url, { headers, timeoutMs: intervalMs * 2 });
      if (res.status !== 429 && res.status < 500) return undefined;
      problem = "HTTP " + res.status;
    } catch (err) {
      problem = String(err && err.message ? err.message : err);
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + 1)));
  }
  return problem;
}

parentPort.on("message", (msg) => {
  if (msg.type === "slots") table = views(msg.buffer);
  else if (msg.type === "long-id") longIds.set(msg.slot, { generation: msg.generation, id: msg.id });
  else if (msg.type === "unhealthy") {
    unhealthy(msg.check, msg.reason).then((problem) => parentPort.postMessage({ type: "unhealthy-sent", problem }));
  } else if (msg.type === "stop") {
    stopped = true;
    clearTimeout(timer);
    clearInterval(watchTimer);
    parentPort.close();
  }
});
if (watchdog) watchTimer = setInterval(checkWatches, watch.pollMs);
if (pingUrl) loop();
`;

/** What the watchdog posts for a job it finds holding the main thread past its time. */
export interface WatchdogReport {
  /** The job-done URL with {@link WATCH_ID_MARK} where the (URL-encoded) job id goes, `isStream=false`. */
  readonly doneUrl: string;
  /** The same with `isStream=true`, for a job that streams. */
  readonly streamDoneUrl: string;
  /** The failure body with {@link WATCH_TIMEOUT_MARK} where the job's time limit in ms goes. */
  readonly failureBody: string;
}

/** Stands for the job id in {@link WatchdogReport}'s URLs (encodeURIComponent leaves it as it is). */
export const WATCH_ID_MARK = "__runlet_job_id__";
/** Stands for the job's time limit in {@link WatchdogReport}'s body (JSON leaves it as it is). */
export const WATCH_TIMEOUT_MARK = "__runlet_timeout_ms__";
/** How often the watchdog looks at the job table, ms: it acts at most this late after a job's watch time. */
const WATCH_POLL_MS = 100;

/** Options of {@link Heartbeat}. */
export interface HeartbeatOptions {
  /** The ping URL with placeholders already substituted; undefined: no pings (watchdog only). */
  readonly pingUrl: string | undefined;
  readonly intervalMs: number;
  readonly apiKey: string | undefined;
  /** Arm the watchdog (only when the worker may end the process), with what it posts. */
  readonly watchdog: WatchdogReport | undefined;
  readonly log: Logger;
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
  #closed: Promise<void> | undefined;
  #unhealthy: Promise<void> | undefined;
  #unhealthySent: (() => void) | undefined;

  constructor(options: HeartbeatOptions) {
    this.#headers = { "user-agent": USER_AGENT };
    this.#intervalMs = options.intervalMs;
    if (options.apiKey !== undefined) this.#headers["authorization"] = options.apiKey;
    this.#slots = new JobSlots((message) => this.#thread.postMessage(message));
    const { watchdog } = options;
    this.#thread = new Thread(THREAD_SOURCE, {
      eval: true,
      workerData: {
        pingUrl: options.pingUrl === undefined ? undefined : withQuery(options.pingUrl, {}),
        intervalMs: options.intervalMs,
        headers: this.#headers,
        version: `runlet/${VERSION}`,
        watchdog: watchdog !== undefined,
        slots: this.#slots.buffer,
        layout: SLOT_LAYOUT,
        flags: SLOT_FLAGS,
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
      },
    });
    this.#thread.on(
      "message",
      (msg: { type: string; level?: "warn" | "error"; message?: string; problem?: string }) => {
        if (msg.type === "log") options.log[msg.level ?? "warn"](msg.message ?? "");
        else if (msg.type === "unhealthy-sent") {
          if (msg.problem !== undefined) options.log.warn(`the unhealthy ping failed: ${msg.problem}`);
          this.#unhealthySent?.();
        }
      },
    );
    this.#thread.on("error", (err) => options.log.error({ err }, "the heartbeat thread failed"));
    // The beat must not keep a finished process alive.
    this.#thread.unref();
  }

  /** A job is held: the pings name it from now on (set before its handler can run). */
  addJob(jobId: string): void {
    this.#slots.add(jobId);
  }

  /** job-stop named the job: the pings leave it out, though it still holds its slot. */
  unlistJob(jobId: string): void {
    this.#slots.unlist(jobId);
  }

  /** The job is held no more. */
  removeJob(jobId: string): void {
    this.#slots.remove(jobId);
  }

  /**
   * Arms the watchdog for a held job: unless unwatched before `atMs`, the thread posts the job's
   * timeout failure (`timeoutMs` in its message; to the stream's job-done URL when `streaming`)
   * and kills the process.
   */
  watch(jobId: string, atMs: number, timeoutMs: number, streaming: boolean): void {
    this.#slots.watch(jobId, atMs, timeoutMs, streaming);
  }

  /** Disarms the watchdog for a job. */
  unwatch(jobId: string): void {
    this.#slots.unwatch(jobId);
  }

  /**
   * Pings once with `status=unhealthy&check=<check>&reason=<reason>` (docs/protocol.md, "Unfit workers") and stops
   * the regular beat. Resolves when the ping was answered or failed (bounded by a few intervals);
   * later calls return the first call's promise.
   */
  unhealthy(check: string, reason: string): Promise<void> {
    this.#unhealthy ??= (async () => {
      if (this.#closed !== undefined) return;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#unhealthySent = resolve;
        // Three attempts of at most two intervals each, plus their pauses.
        timer = setTimeout(resolve, this.#intervalMs * 6 + 2_000);
        this.#thread.postMessage({ type: "unhealthy", check, reason });
      });
      clearTimeout(timer);
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
