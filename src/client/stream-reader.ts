import { RunletError } from "../errors.js";
import { checkDuration } from "../option-schema.js";
import {
  type JobRecord,
  jobRecordSchema,
  type StreamChunk,
  streamResponseSchema,
  TERMINAL_STATUSES,
} from "../protocol/index.js";
import { createReassembler } from "../stream/index.js";
import { delay } from "./delay.js";
import type { Transport } from "./transport.js";
import type { StreamOptions } from "./types.js";

const DEFAULT_STREAM_POLL_MS = 250;
/**
 * Least time between the starts of two reads while chunks keep coming: at most 100 reads a second
 * from one reader, half the platform's `/stream` rate (2000 per 10 s, docs/protocol.md, "Rate limits"). Reading
 * again at once after every answer would fetch about one chunk per read of a fast token stream and
 * exhaust the rate within seconds; then the 429's Retry-After stalls the reader for the rest of
 * the 10 s window.
 */
const DEFAULT_STREAM_READ_INTERVAL_MS = 10;

/**
 * Reads `/stream/<id>` (`{status, stream: [chunks since the previous read]}`, docs/architecture.md, "Decisions",
 * decision 6) until the job is terminal and nothing is left, yielding each chunk once, in order.
 * A job that ends other than COMPLETED throws after its last chunk, so a consumer sees every
 * chunk and then the failure.
 */
export async function* readChunks(
  transport: Transport,
  endpointPath: string,
  jobId: string,
  options: StreamOptions = {},
): AsyncGenerator<StreamChunk, void, undefined> {
  const pollMs = checkDuration("pollIntervalMs", options.pollIntervalMs, 0, DEFAULT_STREAM_POLL_MS);
  const readIntervalMs = checkDuration(
    "readIntervalMs",
    options.readIntervalMs,
    0,
    DEFAULT_STREAM_READ_INTERVAL_MS,
  );
  const path = `${endpointPath}/stream/${encodeURIComponent(jobId)}`;
  let lastReadAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    // Paced from the previous read's start: a read that took this long already needs no pause.
    const paceMs = lastReadAt + readIntervalMs - Date.now();
    if (paceMs > 0) await delay(paceMs, options.signal);
    lastReadAt = Date.now();
    const answer = await transport.send({
      method: "GET",
      path,
      schema: streamResponseSchema,
      // A served read drains the chunks it returns: after a network error or a 5xx they may be
      // gone, so only a refusal (429) is sent again.
      retryable: "when-refused",
      signal: options.signal,
    });
    for (const chunk of answer.stream) yield chunk;
    if (TERMINAL_STATUSES.has(answer.status)) {
      if (answer.stream.length > 0) continue; // the terminal answer may still carry the last chunks
      if (answer.status !== "COMPLETED") {
        throw await jobEndedError(transport, endpointPath, jobId, answer.status, options.signal);
      }
      return;
    }
    if (answer.stream.length === 0) await delay(pollMs, options.signal);
  }
}

/** Reads the stream and yields the handler's values, reassembling split items. */
export async function* readValues<T>(
  transport: Transport,
  endpointPath: string,
  jobId: string,
  options: StreamOptions = {},
): AsyncGenerator<T, void, undefined> {
  const reassembler = createReassembler();
  // When the job fails inside a split item, readChunks throws the job's error and the partial item
  // is dropped: the job's failure is the news, not the incomplete item.
  for await (const chunk of readChunks(transport, endpointPath, jobId, options)) {
    for (const value of reassembler.push(chunk)) yield value as T;
  }
  reassembler.finish();
}

/** The error thrown when a streamed job ends FAILED, TIMED_OUT or CANCELLED, carrying the job's error. */
async function jobEndedError(
  transport: Transport,
  endpointPath: string,
  jobId: string,
  status: string,
  signal: AbortSignal | undefined,
): Promise<RunletError> {
  let record: JobRecord | undefined;
  let lookup: unknown;
  try {
    record = await transport.send({
      method: "GET",
      path: `${endpointPath}/status/${encodeURIComponent(jobId)}`,
      schema: jobRecordSchema,
      retryable: true,
      signal,
    });
  } catch (error) {
    // The record may be gone (retention, ttl): the stream's own status is still worth reporting.
    lookup = error;
  }
  return jobFailedError(jobId, record?.status ?? status, record?.error, lookup);
}

/**
 * RUNLET_CLIENT_JOB_FAILED for a job that ended without completing. A handler's thrown error
 * arrives as the JSON text of the platform's error report; its `error_message` makes the message.
 */
export function jobFailedError(
  jobId: string,
  status: string,
  error: string | undefined,
  cause?: unknown,
): RunletError {
  let reason = error;
  if (error !== undefined) {
    try {
      const report: unknown = JSON.parse(error);
      if (typeof report === "object" && report !== null && "error_message" in report) {
        if (typeof report.error_message === "string") reason = report.error_message;
      }
    } catch {
      // A plain-string error (JobError, a timeout message) is the reason as it is.
    }
  }
  return new RunletError(
    "RUNLET_CLIENT_JOB_FAILED",
    `job ${jobId} ended ${status}${reason === undefined ? "" : `: ${reason}`}`,
    { ...(cause === undefined ? {} : { cause }), details: { id: jobId, status, error } },
  );
}
