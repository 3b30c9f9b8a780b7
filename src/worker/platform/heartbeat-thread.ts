import { parentPort, workerData } from "node:worker_threads";
import { type Answer, HttpTransport } from "../../http/transport.js";
import { textScrubber } from "../../log/redact-text.js";
import { nextRetry, type RetryPolicy } from "../../retry-policy.js";
import { sendWithRetry } from "../../send-with-retry.js";
import { settle } from "../../task-sink.js";
import { unhealthyPingRetry, watchdogPostRetry } from "./backoff.js";
import { JobSlotReader, SLOT_FLAGS, type SlotJob, type SlotMessage } from "./job-slots.js";
import { requestIdHeader } from "./request-id.js";

/**
 * The heartbeat thread's own module (started by heartbeat.ts): the pings (docs/protocol.md,
 * "Heartbeat") and the in-process watchdog. It reads the jobs from the shared job table
 * (job-slots.ts) and talks HTTP through the one transport (src/http/transport.ts) on its node:http
 * client alone: undici would add ~16 MiB to an idle worker's memory, and every thread has its own
 * heap, so this one imports nothing else. The transport takes node:http and node:https through
 * `process.getBuiltinModule` (a static import would load Node's own copy of undici; docs/benchmarks.md,
 * "Cold start"); node:https (with TLS) loads only for an https URL.
 */

/** What the watchdog posts for a job it finds holding the main thread past its time. */
export interface WatchSettings {
  /** The job-done URL with `idMark` where the (URL-encoded) job id goes, `isStream=false`. */
  readonly doneUrl: string;
  /** The same with `isStream=true`. */
  readonly streamDoneUrl: string;
  /** The failure body with `timeoutMark` where the job's time limit in ms goes. */
  readonly failureBody: string;
  /** The failure body of a watched job not yet past its time, ended with the process. */
  readonly endedBody: string;
  readonly idMark: string;
  readonly timeoutMark: string;
  readonly postHeaders: Readonly<Record<string, string>>;
  /** How often the watchdog looks at the table, ms. */
  readonly pollMs: number;
}

/** `workerData` of the heartbeat thread. */
export interface HeartbeatWorkerData {
  readonly runletRole: "heartbeat";
  /** The ping URL (query set but for `job_id`); undefined: no pings, watchdog only. */
  readonly pingUrl: string | undefined;
  readonly intervalMs: number;
  /** No regular ping until a "begin-pings" message (start-up, e.g. setup, still runs). */
  readonly pingsHeld: boolean;
  readonly headers: Readonly<Record<string, string>>;
  /** `runpod_version` of each ping. */
  readonly version: string;
  readonly slots: SharedArrayBuffer;
  /** Undefined: no watchdog. */
  readonly watch: WatchSettings | undefined;
}

/** Main → thread messages. */
export type ToHeartbeat =
  | SlotMessage
  | { readonly type: "unhealthy"; readonly check: string; readonly reason: string }
  | { readonly type: "begin-pings" }
  | { readonly type: "stop" };

/** Thread → main messages. */
export type FromHeartbeat =
  | { readonly type: "log"; readonly level: "warn" | "error"; readonly message: string }
  | { readonly type: "unhealthy-sent"; readonly problem: string | undefined };

/** Most of an answer's body read, bytes: past it the status is taken and the connection dropped. */
const MAX_DRAIN_BYTES = 65_536;

/**
 * The thread's HTTP: the one transport (src/http/transport.ts) on node:http alone (no fast client:
 * the thread stays small), with its redirect rule, bounds and abort path. Made on first use.
 */
let transport: HttpTransport | undefined;

interface SendOptions {
  readonly method?: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly timeoutMs: number;
}

/**
 * One request; resolves with the answer or rejects on a network fault or the timeout, which bounds
 * the wait for the answer and each pause in its body. Redirects follow the transport's rule (the
 * key only to the same origin or its https upgrade).
 */
function send(url: URL, options: SendOptions): Promise<Answer> {
  transport ??= new HttpTransport();
  return transport.request(options.method ?? "GET", url.href, {
    headers: options.headers,
    ...(options.body === undefined ? {} : { body: options.body }),
    answerTimeoutMs: options.timeoutMs,
    answerBodyMs: options.timeoutMs,
    maxAnswerBytes: MAX_DRAIN_BYTES,
  });
}

/**
 * A request sent again by `policy` (src/retry-policy.ts: network faults, 429 and 5xx; a
 * `Retry-After` honoured up to its cap) until one is answered otherwise or the policy stops.
 * Resolves undefined once delivered, else with the last problem; never rejects.
 */
function sendRetried(policy: RetryPolicy, url: () => URL, options: SendOptions): Promise<string | undefined> {
  return sendWithRetry<string | undefined>({
    attempt: async () => {
      try {
        const answer = await send(url(), options);
        if (answer.status !== 429 && answer.status < 500) return { done: undefined };
        return { failed: answer, otherwise: () => `HTTP ${answer.status}` };
      } catch (err) {
        return { failed: { error: err }, otherwise: () => message(err) };
      }
    },
    retry: (attempt, failed) => nextRetry(policy, attempt, failed),
  });
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The thread's whole life: pings, the watchdog, and the main thread's messages. */
function runHeartbeatThread(data: HeartbeatWorkerData): void {
  const port = parentPort!;
  const table = new JobSlotReader(data.slots);
  let stopped = false;
  let beatTimer: NodeJS.Timeout | undefined;
  let beat: Promise<unknown> = Promise.resolve();
  let firing = false;
  /** The regular beat has started (at once, or on "begin-pings"). */
  let looping = false;
  const report = (level: "warn" | "error", text: string): void =>
    port.postMessage({ type: "log", level, message: text } satisfies FromHeartbeat);

  const pingTo = (query: Record<string, string>): URL => {
    const url = new URL(data.pingUrl!);
    for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value);
    const listed = table
      .jobs()
      .filter((j) => (j.flags & SLOT_FLAGS.listed) !== 0)
      .map((j) => j.id);
    if (listed.length > 0) url.searchParams.set("job_id", listed.join(","));
    url.searchParams.set("runpod_version", data.version);
    return url;
  };

  async function ping(): Promise<string | undefined> {
    try {
      const { status } = await send(pingTo({}), { headers: data.headers, timeoutMs: data.intervalMs * 2 });
      return status === 429 || status >= 500 ? `HTTP ${status}` : undefined;
    } catch (err) {
      return message(err);
    }
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      beat = ping();
      const problem = (await beat) as string | undefined;
      if (stopped) break;
      // A refused ping is retried once soon, then the regular beat goes on.
      let wait = data.intervalMs;
      if (problem !== undefined) {
        report("warn", `heartbeat ping failed: ${problem}`);
        wait = Math.max(50, Math.floor(data.intervalMs / 4));
      }
      await new Promise((resolve) => {
        beatTimer = setTimeout(resolve, wait);
      });
    }
  }

  /** The regular beat, its failure reported to the main thread (ping() itself never throws). */
  function beginLoop(): void {
    settle(loop(), (err) => report("error", `the heartbeat's beat failed: ${message(err)}`));
  }

  // A watched job past its time means the main thread is held (it would have unwatched the job),
  // and no job's report can go out from there. The thread cannot tell which job holds the main
  // thread, so it blames none in particular: every watched job is reported, those past their time
  // as timed out and the others as ended with the process, and none is killed without a report.
  function checkWatches(): void {
    if (firing || stopped || data.watch === undefined) return;
    const now = Date.now();
    const watched = table.jobs().filter((j) => (j.flags & SLOT_FLAGS.watched) !== 0);
    if (!watched.some((j) => j.watchAt <= now)) return;
    firing = true;
    settle(fire(data.watch, watched, now), (err) => report("error", `the watchdog failed: ${message(err)}`));
  }

  async function fire(watch: WatchSettings, watched: readonly SlotJob[], now: number): Promise<void> {
    const due = watched.filter((j) => j.watchAt <= now).map((j) => j.id);
    report(
      "error",
      `job ${due.join(", ")} went past its deadline while the main thread is held; the watchdog reports the ${watched.length} watched job(s) and ends the process`,
    );
    await Promise.all(watched.map((job) => postTimeout(watch, job, job.watchAt <= now)));
    // process.exit() would end only this thread; the main thread is stuck, so end the process.
    process.kill(process.pid, "SIGKILL");
  }

  async function postTimeout(watch: WatchSettings, job: SlotJob, due: boolean): Promise<void> {
    const template = (job.flags & SLOT_FLAGS.streaming) !== 0 ? watch.streamDoneUrl : watch.doneUrl;
    const url = new URL(template.split(watch.idMark).join(encodeURIComponent(job.id)));
    const body = (due ? watch.failureBody : watch.endedBody)
      .split(watch.timeoutMark)
      .join(String(job.timeoutMs));
    const headers = { ...data.headers, ...watch.postHeaders, "x-request-id": requestIdHeader(job.id) };
    // An undelivered report is given up: the process is ending either way.
    await sendRetried(watchdogPostRetry, () => url, { method: "POST", headers, body, timeoutMs: 5_000 });
  }

  // One unhealthy ping (docs/protocol.md, "Heartbeat"), after any ping in flight so nothing
  // follows it; the regular beat stops for good.
  async function unhealthy(check: string, reason: string): Promise<string | undefined> {
    stopped = true;
    clearTimeout(beatTimer);
    await beat;
    if (data.pingUrl === undefined) return "no ping URL";
    // The reason leaves the worker: the key this thread sends and the patterns the log scrubs go
    // (the main thread scrubbed its own secrets already; this is the last look).
    const keys = Object.entries(data.headers)
      .filter(([name]) => /^(authorization|x-api-key)$/i.test(name))
      .flatMap(([, value]) => [value, value.replace(/^bearer\s+/i, "")]);
    const scrubbed = textScrubber(keys)(reason);
    return sendRetried(unhealthyPingRetry, () => pingTo({ status: "unhealthy", check, reason: scrubbed }), {
      headers: data.headers,
      timeoutMs: data.intervalMs * 2,
    });
  }

  const watchTimer = data.watch === undefined ? undefined : setInterval(checkWatches, data.watch.pollMs);
  port.on("message", (msg: ToHeartbeat) => {
    if (msg.type === "slots" || msg.type === "long-id") table.receive(msg);
    else if (msg.type === "unhealthy") {
      settle(
        unhealthy(msg.check, msg.reason).then((problem) =>
          port.postMessage({ type: "unhealthy-sent", problem } satisfies FromHeartbeat),
        ),
        (err) => report("error", `the unhealthy ping failed: ${message(err)}`),
      );
    } else if (msg.type === "begin-pings") {
      if (!looping && !stopped && data.pingUrl !== undefined) {
        looping = true;
        beginLoop();
      }
    } else if (msg.type === "stop") {
      stopped = true;
      clearTimeout(beatTimer);
      clearInterval(watchTimer);
      port.close();
    }
  });
  if (data.pingUrl !== undefined && !data.pingsHeld) {
    looping = true;
    beginLoop();
  }
}

const data = workerData as Partial<HeartbeatWorkerData> | null;
if (parentPort !== null && data?.runletRole === "heartbeat") runHeartbeatThread(data as HeartbeatWorkerData);
