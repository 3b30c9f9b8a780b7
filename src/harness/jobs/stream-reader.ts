import { type StreamResponse, TERMINAL_STATUSES } from "../../protocol/api.js";
import type { StreamChunk } from "../../protocol/worker-bodies.js";
import type { JobView } from "./job-entry.js";
import type { JobStore } from "./job-store.js";

/** Most chunk bytes one `/stream` answer carries; the rest comes with the next read. */
const MAX_ANSWER_BYTES = 16 * 1_048_576; // 16 MiB

/**
 * How long a held read goes on gathering once its first chunk arrives, ms. A worker posts a token
 * stream's chunks a fraction of a millisecond apart; answering on the first one would cost the
 * reader one request per chunk and run it into the platform's `/stream` rate limit (2000 per
 * 10 s), while a few ms gather dozens of chunks into one answer.
 */
export const STREAM_GATHER_MS = 5;

/** How far a held read may go on gathering: at most this many chunks, then it answers. */
const MAX_GATHER_CHUNKS = 1_000;

/**
 * One `/stream/<id>` read (docs/architecture.md, "Decisions", item 6): the chunks this reader has not seen yet,
 * waiting up to `holdMs` for one when there are none and the job is still going. A read that had
 * to wait goes on gathering for `gatherMs` after its first chunk arrives (never past `holdMs`, and
 * not once the job has ended); a read that finds chunks waiting answers at once. The job's
 * terminal status is only reported once the reader has every chunk; until then the status says
 * IN_PROGRESS. Returns undefined when the job was deleted meanwhile.
 */
export async function readStream(
  store: JobStore,
  job: JobView,
  reader: string,
  holdMs: number,
  signal: AbortSignal,
  gatherMs: number = STREAM_GATHER_MS,
): Promise<StreamResponse | undefined> {
  const until = store.waits.now() + holdMs;
  let held = false;
  let gatherUntil: number | undefined;
  for (;;) {
    if (job.deleted) return undefined;
    const unread = job.stream.length - job.readPosition(reader);
    if (unread > 0 && held && gatherUntil === undefined)
      gatherUntil = Math.min(until, store.waits.now() + gatherMs);
    const left = (gatherUntil ?? until) - store.waits.now();
    const ready = unread > 0 && (gatherUntil === undefined || unread >= MAX_GATHER_CHUNKS);
    if (ready || TERMINAL_STATUSES.has(job.status) || left <= 0 || signal.aborted || store.waits.closed) {
      break;
    }
    held = true;
    await store.waits.next(job.id, left, signal);
  }
  const from = Math.min(job.readPosition(reader), job.stream.length);
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
  store.markRead(job, reader, read);
  const allRead = read >= job.stream.length;
  const status = TERMINAL_STATUSES.has(job.status) && !allRead ? "IN_PROGRESS" : job.status;
  return { status, stream: chunks };
}
