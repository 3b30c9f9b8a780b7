import { type StreamResponse, TERMINAL_STATUSES } from "../protocol/api.js";
import type { StreamChunk } from "../protocol/worker-bodies.js";
import type { JobEntry } from "./job-entry.js";
import type { JobStore } from "./job-store.js";

/** Most chunk bytes one `/stream` answer carries; the rest comes with the next read. */
const MAX_ANSWER_BYTES = 16 * 1_048_576; // 16 MiB

/**
 * One `/stream/<id>` read (ARCHITECTURE decision 6): the chunks this reader has not seen yet,
 * waiting up to `holdMs` for one when there are none and the job is still going. The job's
 * terminal status is only reported once the reader has every chunk; until then the status says
 * IN_PROGRESS. Returns undefined when the job was deleted meanwhile.
 */
export async function readStream(
  store: JobStore,
  job: JobEntry,
  reader: string,
  holdMs: number,
  signal: AbortSignal,
): Promise<StreamResponse | undefined> {
  const until = Date.now() + holdMs;
  for (;;) {
    if (job.deleted) return undefined;
    const unread = job.stream.length - (job.readers.get(reader) ?? 0);
    const left = until - Date.now();
    if (
      unread > 0 ||
      TERMINAL_STATUSES.has(job.status) ||
      left <= 0 ||
      signal.aborted ||
      store.waits.closed
    ) {
      break;
    }
    await store.waits.next(job.id, left, signal);
  }
  const from = Math.min(job.readers.get(reader) ?? 0, job.stream.length);
  const chunks: StreamChunk[] = [];
  let bytes = 0;
  for (let i = from; i < job.stream.length; i++) {
    const chunk = job.stream[i]!;
    const size = Buffer.byteLength(JSON.stringify(chunk));
    if (chunks.length > 0 && bytes + size > MAX_ANSWER_BYTES) break;
    chunks.push(chunk);
    bytes += size;
  }
  const read = from + chunks.length;
  job.readers.set(reader, read);
  const allRead = read >= job.stream.length;
  const status = TERMINAL_STATUSES.has(job.status) && !allRead ? "IN_PROGRESS" : job.status;
  return { status, stream: chunks };
}
