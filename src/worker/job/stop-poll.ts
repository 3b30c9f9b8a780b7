import { withLinkedSignal } from "../../linked-signal.js";
import { backoffMs } from "../../retry-policy.js";
import { retryAfterMs, sleep } from "../../wait.js";
import type { JobBoard } from "./job-board.js";
import { SLOW_DOWN_MS, type TakeLoopDeps } from "./take-loop.js";

/**
 * The job-stop long poll (docs/protocol.md, "Stopping one job"): `GET` the job-take URL with `/job-take/` replaced
 * by `/job-stop/`, answered 204 or `{"jobsToStop": [...]}`; 429 means wait. Polls only while jobs
 * run (only a running job can be stopped).
 */

/**
 * One poll cycle lasts at least this long when the answer is empty (204, or no ids): a server
 * that answers at once would otherwise be polled in a tight loop. The reference waits 1 s too.
 */
export const STOP_POLL_MIN_CYCLE_MS = 1_000;

/**
 * The part of the worker's {@link JobBoard} the poll uses: a `Pick` of the class so
 * go-to-definition lands on its methods; only the signal-leak test passes another.
 */
export type StopPollBoard = Pick<JobBoard, "size" | "waitForChange" | "stop">;

/**
 * The job ids of a 200 answer: the strings of `jobsToStop` (other items are ignored, so one bad
 * item does not keep the others running); none for an empty or `null` body. Throws on anything
 * else (a fault, backed off).
 */
export function readJobsToStop(text: string): string[] {
  if (text.trim() === "") return [];
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`job-stop answer is not JSON: ${text.slice(0, 200)}`);
  }
  if (body === null) return [];
  const list = typeof body === "object" ? (body as { jobsToStop?: unknown }).jobsToStop : undefined;
  if (!Array.isArray(list)) throw new Error(`bad job-stop answer: ${text.slice(0, 200)}`);
  return list.filter((id): id is string => typeof id === "string" && id !== "");
}

/**
 * Polls job-stop until `closing` aborts (the worker aborts it after the shutdown grace, not when
 * it stops taking: a job-stop sent while running jobs finish up is still seen), handing each
 * named id to `board.stop`; never throws.
 * `slowDownMs` is the wait after a 429 without Retry-After.
 */
export async function pollJobStops(
  { config, http, log, closing }: TakeLoopDeps,
  board: StopPollBoard,
  slowDownMs = SLOW_DOWN_MS,
): Promise<void> {
  const url = config.urls.stop;
  // No stop channel: the worker logged why at start.
  if (url === undefined) return;
  let faults = 0;
  while (!closing.aborted) {
    if (board.size === 0) {
      // Its own signal, not the board's: the poll outlives the take loop into the shutdown grace.
      await board.waitForChange(60_000, closing);
      continue;
    }
    let waitMs = 0;
    // On the worker's clock: a ManualClock that stands still pads every cycle by the full second.
    const sentAt = config.clock.now();
    const padCycle = (): number => Math.max(0, STOP_POLL_MIN_CYCLE_MS - (config.clock.now() - sentAt));
    try {
      const response = await withLinkedSignal(closing, config.takeTimeoutMs, (signal) =>
        http.get(url, { signal }),
      );
      if (response.status === 429) {
        waitMs =
          retryAfterMs(response.headers["retry-after"], { capMs: config.pollRetry.maxRetryAfterMs }) ??
          slowDownMs;
      } else if (response.truncated !== undefined) {
        throw new Error(
          `job-stop answered HTTP ${response.status} with a body not read to its end (${response.truncated})`,
        );
      } else if (response.status === 200 || response.status === 204) {
        faults = 0;
        const ids = response.status === 200 ? readJobsToStop(response.text) : [];
        for (const id of ids) board.stop(id);
        if (ids.length === 0) waitMs = padCycle();
      } else {
        throw new Error(`job-stop answered HTTP ${response.status}`);
      }
    } catch (err) {
      if (closing.aborted) break;
      // Our own long-poll cap ended the request: not a fault, poll again at once.
      if ((err as Error).name !== "TimeoutError" && (err as Error).name !== "AbortError") {
        waitMs = backoffMs(config.pollRetry, faults++);
        log.warn({ err: (err as Error).message, waitMs }, "job-stop poll failed; backing off");
      }
    }
    if (waitMs > 0) await sleep(waitMs, closing, config.clock);
  }
}
