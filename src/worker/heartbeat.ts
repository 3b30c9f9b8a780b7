import { Worker as Thread } from "node:worker_threads";
import type { Logger } from "pino";
import { RESULT_POST_HEADERS, withQuery } from "../protocol/index.js";
import { USER_AGENT, VERSION } from "../version.js";

/**
 * The heartbeat (worker-protocol §7) on its own thread, so a handler that blocks the main thread
 * does not stop the pings; the same thread is the in-process watchdog: told each job's hard-stop
 * time, it posts the timeout itself and kills the process when the main thread cannot.
 *
 * The thread is plain JavaScript evaluated from a string, so it starts the same way from
 * TypeScript sources, the CLI and a bundle (no file to find, no loader needed). It is kept tiny
 * because every thread has its own heap: it talks HTTP through node:http(s), not `fetch`,
 * whose undici would add ~12 MiB to an idle worker's memory.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { pingUrl, intervalMs, headers, version, watchdog } = workerData;

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
let jobIds = [];
let stopped = false;
let timer;
let beat = Promise.resolve();
const watches = new Map();
const report = (level, message, extra) => parentPort.postMessage({ type: "log", level, message, extra });

async function ping() {
  const url = new URL(pingUrl);
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

async function fire(id) {
  const w = watches.get(id);
  if (w === undefined) return;
  report("error", "job " + id + " ignored its deadline and holds the main thread; reporting it from the watchdog and exiting");
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const res = await send(w.url, { method: "POST", headers: w.headers, body: w.body, timeoutMs: 5000 });
      if (res.status < 500 && res.status !== 429) break;
    } catch {
      // Network fault: try again shortly; the process is exiting either way.
    }
    await new Promise((resolve) => setTimeout(resolve, 200 * (attempt + 1)));
  }
  // process.exit() would end only this thread; the main thread is stuck, so end the process.
  process.kill(process.pid, "SIGKILL");
}

// Worker-protocol §7: one unhealthy ping (a retry only if it did not arrive), after any ping in
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
  if (msg.type === "jobs") jobIds = msg.ids;
  else if (msg.type === "unhealthy") {
    unhealthy(msg.check, msg.reason).then((problem) => parentPort.postMessage({ type: "unhealthy-sent", problem }));
  }
  else if (msg.type === "watch" && watchdog) {
    const delay = Math.max(0, msg.at - Date.now());
    const previous = watches.get(msg.id);
    if (previous !== undefined) clearTimeout(previous.timer);
    watches.set(msg.id, { url: msg.url, body: msg.body, headers: msg.headers, timer: setTimeout(() => fire(msg.id), delay) });
  } else if (msg.type === "unwatch") {
    const w = watches.get(msg.id);
    if (w !== undefined) clearTimeout(w.timer);
    watches.delete(msg.id);
  } else if (msg.type === "stop") {
    stopped = true;
    clearTimeout(timer);
    for (const w of watches.values()) clearTimeout(w.timer);
    parentPort.close();
  }
});
if (pingUrl) loop();
`;

/** Options of {@link Heartbeat}. */
export interface HeartbeatOptions {
  /** The ping URL with placeholders already substituted; undefined: no pings (watchdog only). */
  readonly pingUrl: string | undefined;
  readonly intervalMs: number;
  readonly apiKey: string | undefined;
  /** Arm the watchdog (only when the worker may end the process). */
  readonly watchdog: boolean;
  readonly log: Logger;
}

/** The heartbeat and watchdog thread, driven from the main thread. */
export class Heartbeat {
  readonly #thread: Thread;
  readonly #headers: Record<string, string>;
  readonly #intervalMs: number;
  #closed: Promise<void> | undefined;
  #unhealthy: Promise<void> | undefined;
  #unhealthySent: (() => void) | undefined;

  constructor(options: HeartbeatOptions) {
    this.#headers = { "user-agent": USER_AGENT };
    this.#intervalMs = options.intervalMs;
    if (options.apiKey !== undefined) this.#headers["authorization"] = options.apiKey;
    this.#thread = new Thread(THREAD_SOURCE, {
      eval: true,
      workerData: {
        pingUrl: options.pingUrl === undefined ? undefined : withQuery(options.pingUrl, {}),
        intervalMs: options.intervalMs,
        headers: this.#headers,
        version: `runlet/${VERSION}`,
        watchdog: options.watchdog,
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

  /** Tells the thread which jobs are in progress (sent with every ping). */
  setJobs(ids: readonly string[]): void {
    this.#thread.postMessage({ type: "jobs", ids: [...ids] });
  }

  /** Arms the watchdog for a job: unless unwatched before `atMs`, the thread posts `body` to `url` and kills the process. */
  watch(jobId: string, atMs: number, url: string, body: string): void {
    const headers = { ...this.#headers, ...RESULT_POST_HEADERS, "x-request-id": jobId };
    this.#thread.postMessage({ type: "watch", id: jobId, at: atMs, url, body, headers });
  }

  /** Disarms the watchdog for a job. */
  unwatch(jobId: string): void {
    this.#thread.postMessage({ type: "unwatch", id: jobId });
  }

  /**
   * Pings once with `status=unhealthy&check=<check>&reason=<reason>` (worker-protocol §7) and stops
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
