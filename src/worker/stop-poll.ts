import type { Logger } from "pino";
import { expandTemplate, jobsToStopSchema, swapTakeRoute } from "../protocol/index.js";
import { backoffDelayMs, retryAfterMs, sleep } from "./backoff.js";
import type { WorkerConfig } from "./config.js";
import type { PlatformHttp } from "./platform-http.js";

/**
 * The job-stop long poll (worker-protocol §6): `GET` the job-take URL with `/job-take/` replaced
 * by `/job-stop/`, answered 204 or `{"jobsToStop": [...]}`; 429 means wait. Polls only while jobs
 * run (only a running job can be stopped).
 */

/** What the poll needs from the worker. */
export interface StopPollDeps {
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly log: Logger;
  /** Ends the poll (shutdown). */
  readonly closing: AbortSignal;
  /** How many jobs run now. */
  readonly running: () => number;
  /** Resolves when the job list changes, `ms` passes, or the worker closes. */
  readonly waitForChange: (ms: number) => Promise<void>;
  /** The platform named this job. */
  readonly stop: (jobId: string) => void;
  /** Wait after a 429 without Retry-After, ms. */
  readonly slowDownMs: number;
}

/** The job-stop URL of this worker. */
export function stopUrl(config: WorkerConfig): string {
  const ids = { podId: config.podId, gpuTypeId: config.gpuTypeId, id: config.podId };
  return swapTakeRoute(expandTemplate(config.jobTakeUrl, ids), "job-stop");
}

/** Polls job-stop until `deps.closing` aborts; never throws. */
export async function pollJobStops(deps: StopPollDeps): Promise<void> {
  const { config, http, log, closing } = deps;
  const url = stopUrl(config);
  let faults = 0;
  while (!closing.aborted) {
    if (deps.running() === 0) {
      await deps.waitForChange(60_000);
      continue;
    }
    let waitMs = 0;
    try {
      const response = await http.get(url, {
        signal: AbortSignal.any([closing, AbortSignal.timeout(config.takeTimeoutMs)]),
      });
      if (response.status === 200) {
        faults = 0;
        const parsed = jobsToStopSchema.safeParse(JSON.parse(response.text));
        if (!parsed.success) throw new Error(`bad job-stop answer: ${response.text.slice(0, 200)}`);
        for (const id of parsed.data.jobsToStop) deps.stop(id);
      } else if (response.status === 429) {
        waitMs = retryAfterMs(response.headers["retry-after"]) ?? deps.slowDownMs;
      } else if (response.status !== 204) {
        throw new Error(`job-stop answered HTTP ${response.status}`);
      } else faults = 0;
    } catch (err) {
      if (closing.aborted) break;
      // Our own long-poll cap ended the request: not a fault, poll again at once.
      if ((err as Error).name !== "TimeoutError" && (err as Error).name !== "AbortError") {
        waitMs = backoffDelayMs(faults++, { baseMs: config.retryBaseMs, capMs: config.retryCapMs });
        log.warn({ err: (err as Error).message, waitMs }, "job-stop poll failed; backing off");
      }
    }
    if (waitMs > 0) await sleep(waitMs, closing);
  }
}
