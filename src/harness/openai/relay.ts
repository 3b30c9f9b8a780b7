import type { ServerResponse } from "node:http";
import { settle } from "../../task-sink.js";
import type { JobEntry } from "../jobs/job-entry.js";
import type { JobStore } from "../jobs/job-store.js";
import {
  asOpenAIError,
  endHeaders,
  jobEndError,
  NO_RETRY,
  type OpenAIErrorBody,
  openAIError,
  sendOpenAIError,
  statusOf,
} from "./error-body.js";
import type { JobFeed } from "./job-feed.js";
import { frame, SseFramer, type SsePiece, tailOf } from "./sse-framer.js";

/** What the relay needs from the harness. */
export interface RelayContext {
  readonly store: JobStore;
  readonly feed: JobFeed;
}

/** The last event of an OpenAI stream. */
const DONE_EVENT = "data: [DONE]\n\n";

/**
 * Answers an OpenAI request from its job as it goes, driven by the harness's job events: stream
 * items are written as they arrive (the response starts with the first one, so a job that fails
 * before streaming still gets its error status), the end answers or closes the stream. A client
 * that hangs up cancels the job.
 *
 * A job whose worker was lost goes back to the queue with its stream emptied, and its next attempt
 * streams from its first item again: if nothing has reached the client yet the relay starts over
 * with it; otherwise the stream ends with a `job_restarted` error event and the job is cancelled,
 * since tokens already sent cannot be taken back and sending the new attempt's would repeat them.
 */
export function relay(
  ctx: RelayContext,
  res: ServerResponse,
  job: JobEntry,
  streaming: boolean,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const idHeader = { "x-request-id": job.id };
    /** Chunks of the current attempt handed to the framer. */
    let taken = 0;
    let framer = new SseFramer();
    let tail = "";
    let finished = false;
    const stopWaiting = new AbortController();

    const start = (): void => {
      if (res.headersSent) return;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        ...idHeader,
      });
    };
    const write = (piece: SsePiece): void => {
      if (res.destroyed) return;
      start();
      res.write(piece);
      tail = tailOf(tail, piece, DONE_EVENT.length);
    };
    /** Writes what the chunks not yet taken complete; false when the stream had to end instead. */
    const writePending = (): boolean => {
      try {
        for (; taken < job.stream.length; taken++) {
          for (const piece of framer.push(job.stream[taken]!)) write(piece);
        }
        return true;
      } catch (err) {
        broken(err);
        return false;
      }
    };
    const finish = (): void => {
      if (finished) return;
      finished = true;
      unwatch();
      stopWaiting.abort();
      resolve();
    };
    /** Ends the answer with an error; `headers` go with it when the response has not started. */
    const fail = (
      status: number,
      body: OpenAIErrorBody,
      headers: Readonly<Record<string, string>> = {},
    ): void => {
      if (finished) return;
      if (res.headersSent) {
        // Mid-stream there is no status to set: the error is the last event (clients raise it).
        if (!res.destroyed) res.end(`data: ${JSON.stringify(body)}\n\n`);
      } else {
        sendOpenAIError(res, status, body, { ...headers, ...idHeader });
      }
      finish();
    };
    /** Ends the answer first (so the cancel's end event is not heard), then stops the job nobody reads. */
    const abandon = (body: OpenAIErrorBody): void => {
      // The job is cancelled: a client that sent the request again would start it over.
      fail(500, body, NO_RETRY);
      ctx.store.cancel(job);
    };
    /** The worker's chunks do not reassemble (out of order, a part missing): a stream cannot go on. */
    const broken = (err: unknown): void => {
      const message = err instanceof Error ? err.message : String(err);
      abandon(openAIError(`the job's stream is broken: ${message}`, "server_error", "stream_invalid"));
    };
    /** A stream event numbered `index` (from 1 in each attempt): a new attempt when it is not the next. */
    const onChunk = (index: number): void => {
      if (index <= taken) {
        if (res.headersSent) {
          abandon(
            openAIError(
              "the job's worker was lost mid-stream and the job went back to the queue; what was sent cannot be taken back, so this stream ends here",
              "server_error",
              "job_restarted",
            ),
          );
          return;
        }
        taken = 0;
        framer = new SseFramer();
      }
      writePending();
    };
    const end = (): void => {
      if (job.status !== "COMPLETED") {
        const { status, body, headers } = jobEndError(job.status, job.error);
        fail(status, body, headers);
        return;
      }
      if (streaming) {
        if (!writePending()) return;
        try {
          framer.finish();
        } catch (err) {
          broken(err);
          return;
        }
        // A handler that answered a stream request with one value: its output is the stream.
        if (taken === 0 && job.hasOutput && !(Array.isArray(job.output) && job.output.length === 0)) {
          for (const piece of frame(job.output)) write(piece);
        }
        start();
        if (tail !== DONE_EVENT) write(DONE_EVENT);
        res.end();
        finish();
        return;
      }
      // `return_aggregate_stream`: a generator that yielded its answer once gives a one-item list.
      const output = Array.isArray(job.output) && job.output.length === 1 ? job.output[0] : job.output;
      const error = asOpenAIError(output);
      if (error !== undefined) {
        // The job ran and answered this error: sending the request again runs it again.
        const status = statusOf(error);
        fail(status, error, endHeaders(status));
        return;
      }
      res.writeHead(200, { "content-type": "application/json", ...idHeader });
      res.end(JSON.stringify(output ?? null));
      finish();
    };

    const unwatch = ctx.feed.watch(job.id, (event) => {
      if (finished) return;
      if (event.type === "stream" && streaming) onChunk(event.index);
      else if (event.type === "end") end();
    });
    res.once("close", () => {
      if (finished) return;
      // The client went away before its answer was complete: nobody will read the job's result.
      ctx.store.cancel(job);
      finish();
    });
    settle(
      untilGone(ctx, job, stopWaiting.signal).then((gone) => {
        if (finished || !gone) return;
        if (ctx.store.waits.closed) {
          fail(503, openAIError("the harness is shutting down", "server_error", "shutting_down"));
        } else {
          fail(
            404,
            openAIError(`job "${job.id}" was deleted before it ended`, "not_found_error", "job_deleted"),
            NO_RETRY,
          );
        }
      }),
      (err) => {
        // untilGone only reads the store; were it to fail, the answer says so rather than hanging.
        const message = err instanceof Error ? err.message : String(err);
        fail(
          500,
          openAIError(`waiting on job "${job.id}" failed: ${message}`, "server_error", "server_error"),
        );
      },
    );
  });
}

/**
 * Resolves true when the job is deleted (its endpoint removed, its ttl) or the harness closes —
 * ends the job events do not report — and false once `signal` aborts.
 */
async function untilGone(ctx: RelayContext, job: JobEntry, signal: AbortSignal): Promise<boolean> {
  for (;;) {
    if (signal.aborted) return false;
    if (job.deleted || ctx.store.waits.closed) return true;
    await ctx.store.waits.next(job.id, 60_000, signal);
  }
}
