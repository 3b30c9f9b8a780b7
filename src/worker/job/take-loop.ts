import type { Logger } from "pino";
import { withLinkedSignal } from "../../linked-signal.js";
import { type DeliveredJob, deliveredJobSchema } from "../../protocol/job.js";
import { backoffMs } from "../../retry-policy.js";
import { retryAfterMs, sleep } from "../../wait.js";
import type { WorkerConfig } from "../config.js";
import { EMPTY_PAUSE, MAX_RETRY_AFTER_MS } from "../platform/backoff.js";
import type { PlatformHttp } from "../platform/platform-http.js";
import type { BadJob, JobBoard } from "./job-board.js";

/**
 * The take loop (docs/protocol.md, "Taking jobs"): asks for as many jobs as there are free slots (job-take, or
 * job-take-batch for more than one), with an exact `job_in_progress`, and handles every answer:
 * none, 429 (wait), faults (capped jittered back-off), jobs (admitted, never more than asked for);
 * and the one take (`take`): its request and the reading of its answer.
 */

/** How long to wait on a 429 without Retry-After (the reference worker's figure). */
export const SLOW_DOWN_MS = 5_000;
/**
 * An empty answer (204, empty 200, 400) faster than this is "instant": the server did not hold the
 * long poll (fast-boot workers get 400 at once), so the loop pauses before asking again.
 */
export const INSTANT_EMPTY_MS = 1_000;
/** While every slot is busy, a concurrency function is consulted at least this often. */
const CONCURRENCY_RECHECK_MS = 1_000;

/** What the worker's long-running loops (this one and the job-stop poll) work with. */
export interface TakeLoopDeps {
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Aborted when the worker stops taking (close, a signal, unfitness): ends the loop and its long poll. */
  readonly closing: AbortSignal;
}

/**
 * The part of the worker's {@link JobBoard} the take loop uses. A `Pick` of the class, not an
 * interface of its own, so go-to-definition lands on JobBoard's methods; only the signal-leak test
 * (test/worker/signal-leak.unit.test.ts) passes another: an empty board, to drive the loop alone.
 */
export type TakeLoopBoard = Pick<JobBoard, "size" | "consultConcurrency" | "waitForChange" | "admit">;

/** Runs until `closing` aborts; the jobs of each answer go to `board.admit`. */
export async function runTakeLoop(
  { config, http, log, closing }: TakeLoopDeps,
  board: TakeLoopBoard,
): Promise<void> {
  let faults = 0;
  let instantEmpties = 0;
  while (!closing.aborted) {
    const running = board.size;
    const free = board.consultConcurrency() - running;
    if (free <= 0) {
      await board.waitForChange(CONCURRENCY_RECHECK_MS);
      continue;
    }
    const held = running > 0;
    const url = config.urls.take(free, held);
    let answer: Awaited<ReturnType<typeof take>>;
    // On the worker's clock, like the pause itself: a ManualClock that stands still counts every
    // empty answer as instant, so a test sees each pause and moves the clock past it.
    const sentAt = config.clock.now();
    try {
      answer = await withLinkedSignal(closing, config.takeTimeoutMs, (signal) =>
        take(http, url, signal, free, held),
      );
    } catch {
      // Our own long-poll cap or shutdown aborted the request: no job was handed over.
      continue;
    }
    if (answer.kind === "none") {
      faults = 0;
      if (config.clock.now() - sentAt < INSTANT_EMPTY_MS) {
        // Without a pause an instant answer makes the loop spin (hundreds of takes a second).
        await sleep(backoffMs(EMPTY_PAUSE, instantEmpties++), closing, config.clock);
      } else instantEmpties = 0;
    } else if (answer.kind === "slow-down") {
      log.warn({ waitMs: answer.waitMs ?? SLOW_DOWN_MS }, "job-take answered 429; waiting");
      await sleep(answer.waitMs ?? SLOW_DOWN_MS, closing, config.clock);
    } else if (answer.kind === "fault") {
      const waitMs = backoffMs(config.pollRetry, faults++);
      log.warn({ reason: answer.reason, waitMs }, "job-take failed; backing off");
      await sleep(waitMs, closing, config.clock);
    } else {
      faults = 0;
      instantEmpties = 0;
      board.admit(answer.jobs, answer.bad, free);
    }
  }
}

// One take: a job-take or job-take-batch request and the reading of its answer.

/** What a take answered. */
export type TakeAnswer =
  | { readonly kind: "jobs"; readonly jobs: DeliveredJob[]; readonly bad: BadJob[] }
  | { readonly kind: "none"; readonly status: number }
  | { readonly kind: "slow-down"; readonly waitMs: number | undefined }
  | { readonly kind: "fault"; readonly reason: string };

function readJob(item: unknown): { job: DeliveredJob } | { bad: BadJob } {
  const parsed = deliveredJobSchema.safeParse(item);
  if (parsed.success) return { job: parsed.data as DeliveredJob };
  const rawId = typeof item === "object" && item !== null ? (item as { id?: unknown }).id : undefined;
  const id = typeof rawId === "string" && rawId !== "" ? rawId : undefined;
  const reason = parsed.error.issues.map((i) =>
    i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message,
  );
  return { bad: { id, reason: `the platform delivered a malformed job (${reason.join("; ")})` } };
}

/**
 * The largest take answer read for `asked` jobs, bytes: the platform's largest job payload
 * (20 MB, a `/runsync` body: docs/protocol.md, "Taking jobs") per job asked for. A longer answer
 * is a fault, not read to its end.
 */
export function takeAnswerLimit(asked: number): number {
  return Math.max(1, asked) * 20 * 1024 * 1024;
}

/**
 * When the take's signal aborts (the worker closing, or its own long-poll cap) before the answer
 * came, how long the answer still has to arrive, ms: a job the platform handed over in that
 * moment is on the wire, and cutting the connection then would leave it IN_PROGRESS there, held
 * by nobody, until the worker's pings lapse. An answer whose headers came is read to its end.
 */
export const TAKE_SETTLE_MS = 250;
/** Longest time a take answer's body may take once its headers came, ms. */
const TAKE_BODY_MS = 120_000;

/**
 * Sends one take for `asked` jobs and reads the answer; never throws except when `signal` aborts.
 */
export async function take(
  http: PlatformHttp,
  url: string,
  signal: AbortSignal,
  asked = 1,
  jobsHeld = false,
): Promise<TakeAnswer> {
  let status: number;
  let text: string;
  let headers: Readonly<Record<string, string | string[] | undefined>>;
  let truncated: "bytes" | "time" | undefined;
  const limit = takeAnswerLimit(asked);
  try {
    ({ status, text, headers, truncated } = await http.take(url, jobsHeld, {
      signal,
      maxAnswerBytes: limit,
      answerBodyMs: TAKE_BODY_MS,
      settleMs: TAKE_SETTLE_MS,
    }));
  } catch (err) {
    if (signal.aborted) throw err;
    return { kind: "fault", reason: err instanceof Error ? err.message : String(err) };
  }
  if (truncated === "bytes")
    return { kind: "fault", reason: `the take answer is over ${limit} bytes; not read further` };
  if (truncated === "time")
    return { kind: "fault", reason: `the take answer's body took over ${TAKE_BODY_MS} ms; not read further` };
  // Like the reference worker, any answer below 400 with a body is read as jobs (not only 200).
  if (status === 204 || status === 400 || (status < 400 && text.trim() === ""))
    return { kind: "none", status };
  if (status === 429)
    return { kind: "slow-down", waitMs: retryAfterMs(headers["retry-after"], { capMs: MAX_RETRY_AFTER_MS }) };
  if (status > 400) return { kind: "fault", reason: `HTTP ${status}: ${text.slice(0, 200)}` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { kind: "fault", reason: `the take answer is not JSON: ${text.slice(0, 200)}` };
  }
  // `null` is "no job", not a malformed one.
  if (body === null) return { kind: "none", status };
  const items = Array.isArray(body) ? body : [body];
  const jobs: DeliveredJob[] = [];
  const bad: BadJob[] = [];
  for (const item of items) {
    const read = readJob(item);
    if ("bad" in read) bad.push(read.bad);
    else jobs.push(read.job);
  }
  return { kind: "jobs", jobs, bad };
}
