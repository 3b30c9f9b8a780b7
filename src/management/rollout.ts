import { RunletError } from "../errors.js";
import type { EndpointReleases } from "../protocol/management/serverless.js";
import { sleep } from "../wait.js";
import type { ManagementClient } from "./client.js";

/** Options of {@link waitForRollout}. */
export interface WaitForRolloutOptions {
  /** Longest wait, ms. @default 600_000 (10 min) */
  readonly timeoutMs?: number;
  /** Time between polls, ms. @default 5_000 */
  readonly intervalMs?: number;
  /** Aborts the wait (and the poll in flight). */
  readonly signal?: AbortSignal;
  /** Told each poll's answer: how many workers run the newest release. */
  readonly onProgress?: (releases: EndpointReleases) => void;
}

/**
 * Polls `GET /v2/serverless/{id}/releases` until the rollout is done (`rollout.inProgress` false),
 * answering the last poll. Past `timeoutMs` it fails with RUNLET_MANAGEMENT_ROLLOUT_TIMEOUT naming
 * how many workers run the newest release; an abort ends it with the signal's reason.
 *
 * @example
 * await waitForRollout(client, endpoint.id, { onProgress: (r) => log(r.rollout.percentOnLatest) });
 */
export async function waitForRollout(
  client: Pick<ManagementClient, "serverless">,
  endpointId: string,
  options: WaitForRolloutOptions = {},
): Promise<EndpointReleases> {
  const timeoutMs = options.timeoutMs ?? 600_000;
  const intervalMs = options.intervalMs ?? 5_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    options.signal?.throwIfAborted();
    const releases = await client.serverless.releases(
      endpointId,
      options.signal === undefined ? {} : { signal: options.signal },
    );
    options.onProgress?.(releases);
    if (!releases.rollout.inProgress) return releases;
    const left = deadline - Date.now();
    if (left <= 0) {
      const { workersOnLatest, workersTotal } = releases.rollout;
      throw new RunletError(
        "RUNLET_MANAGEMENT_ROLLOUT_TIMEOUT",
        `the rollout of endpoint ${endpointId} was not done after ${timeoutMs} ms: ${workersOnLatest} of ${workersTotal} workers run the newest release`,
        { details: { endpointId, workersOnLatest, workersTotal } },
      );
    }
    if (!(await sleep(Math.min(intervalMs, left), options.signal))) options.signal?.throwIfAborted();
  }
}
