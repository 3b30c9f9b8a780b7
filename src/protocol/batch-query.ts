import { withQuery } from "./urls.js";

/**
 * Which batch a job ran in, told on its final job-done as query parameters (`batch_id`,
 * `batch_size`, `batch_wait_ms`): the body stays exactly what the reference worker posts, and a
 * query parameter the platform does not know is ignored (an inference: the templates the platform
 * hands out already carry its own, such as `gpu`). The harness records them for its dashboard.
 */

/** A batched job's batch: its id, how many jobs it ran, and how long this job waited in it (ms). */
export interface BatchQuery {
  readonly id: string;
  readonly size: number;
  readonly waitMs: number;
}

/** `url` with the batch's query parameters; unchanged when `batch` is undefined (a job run alone). */
export function withBatchQuery(url: string, batch: BatchQuery | undefined): string {
  if (batch === undefined) return url;
  return withQuery(url, {
    batch_id: batch.id,
    batch_size: batch.size,
    batch_wait_ms: Math.round(batch.waitMs),
  });
}

/** The batch a job-done's query names, or undefined when it names none (or names it badly). */
export function readBatchQuery(params: URLSearchParams): BatchQuery | undefined {
  const id = params.get("batch_id");
  const size = Number(params.get("batch_size"));
  const waitMs = Number(params.get("batch_wait_ms"));
  if (id === null || id === "" || id.length > 200) return undefined;
  if (!Number.isSafeInteger(size) || size < 1 || !Number.isSafeInteger(waitMs) || waitMs < 0)
    return undefined;
  return { id, size, waitMs };
}
