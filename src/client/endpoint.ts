import { RunletError } from "../errors.js";
import { timedOut, withLinkedSignal } from "../linked-signal.js";
import { checkDuration } from "../option-schema.js";
import {
  healthSchema,
  jobRecordSchema,
  jobRefSchema,
  purgeResponseSchema,
  TERMINAL_STATUSES,
} from "../protocol/index.js";
import { withTraceContext } from "../telemetry/trace-context.js";
import { delay } from "./delay.js";
import { readChunks, readValues } from "./stream-reader.js";
import type { Transport } from "./transport.js";
import type { EndpointClient, TypedJobRecord } from "./types.js";

const DEFAULT_WAIT_TIMEOUT_MS = 600_000;
const DEFAULT_WAIT_POLL_MS = 1_000;

/** Builds the job-API client of one endpoint over a shared transport. */
export function createEndpointClient<TInput, TOutput, TStreamItem>(
  transport: Transport,
  endpointId: string,
): EndpointClient<TInput, TOutput, TStreamItem> {
  if (typeof endpointId !== "string" || endpointId === "") {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `endpoint id must be a non-empty string, got ${String(endpointId)}`,
    );
  }
  const base = encodeURIComponent(endpointId);
  const jobPath = (route: string, jobId: string) => {
    if (typeof jobId !== "string" || jobId === "") {
      throw new RunletError(
        "RUNLET_CONFIG_INVALID",
        `job id must be a non-empty string, got ${String(jobId)}`,
      );
    }
    return `${base}/${route}/${encodeURIComponent(jobId)}`;
  };

  const client: EndpointClient<TInput, TOutput, TStreamItem> = {
    id: endpointId,
    run: (body, options = {}) =>
      transport.send({
        method: "POST",
        path: `${base}/run`,
        body: withTraceContext(body),
        schema: jobRefSchema,
        retryable: false,
        signal: options.signal,
      }),
    runsync: (body, options = {}) =>
      transport.send({
        method: "POST",
        path: `${base}/runsync`,
        query: { wait: options.waitMs },
        body: withTraceContext(body),
        schema: jobRecordSchema,
        retryable: false,
        signal: options.signal,
        // The server may hold the request for the whole wait (its default is 90 s).
        holdMs: options.waitMs ?? 90_000,
      }) as Promise<TypedJobRecord<TOutput>>,
    status: (jobId, options = {}) =>
      transport.send({
        method: "GET",
        path: jobPath("status", jobId),
        query: { ttl: options.ttlMs },
        schema: jobRecordSchema,
        retryable: true,
        signal: options.signal,
      }) as Promise<TypedJobRecord<TOutput>>,
    async wait(jobId, options = {}) {
      const timeoutMs = checkDuration("timeoutMs", options.timeoutMs, 1, DEFAULT_WAIT_TIMEOUT_MS);
      const pollMs = checkDuration("pollIntervalMs", options.pollIntervalMs, 0, DEFAULT_WAIT_POLL_MS);
      let last: TypedJobRecord<TOutput> | undefined;
      let linked: AbortSignal | undefined;
      // Linked to the caller's signal and the deadline without AbortSignal.any (a Node 20 leak) or
      // AbortSignal.timeout (held until it fires): nothing outlives the call.
      try {
        return await withLinkedSignal(options.signal, timeoutMs, async (signal) => {
          linked = signal;
          for (;;) {
            last = await client.status(jobId, { signal });
            if (TERMINAL_STATUSES.has(last.status)) return last;
            await delay(pollMs, signal);
          }
        });
      } catch (error) {
        if (options.signal?.aborted || linked === undefined || !timedOut(linked)) throw error;
        throw new RunletError(
          "RUNLET_CLIENT_TIMEOUT",
          `job ${jobId} was still ${last?.status ?? "unknown"} after ${timeoutMs} ms; wait longer or poll status`,
          { cause: error, details: { id: jobId, status: last?.status, timeoutMs } },
        );
      }
    },
    stream: (jobId, options = {}) => readValues<TStreamItem>(transport, base, checkedId(jobId), options),
    streamChunks: (jobId, options = {}) => readChunks(transport, base, checkedId(jobId), options),
    cancel: (jobId, options = {}) =>
      transport.send({
        method: "POST",
        path: jobPath("cancel", jobId),
        schema: jobRefSchema,
        retryable: false,
        signal: options.signal,
      }),
    retry: (jobId, options = {}) =>
      transport.send({
        method: "POST",
        path: jobPath("retry", jobId),
        schema: jobRefSchema,
        retryable: false,
        signal: options.signal,
      }),
    purgeQueue: (options = {}) =>
      transport.send({
        method: "POST",
        path: `${base}/purge-queue`,
        schema: purgeResponseSchema,
        retryable: false,
        signal: options.signal,
      }),
    health: (options = {}) =>
      transport.send({
        method: "GET",
        path: `${base}/health`,
        schema: healthSchema,
        retryable: true,
        signal: options.signal,
      }),
  };
  const checkedId = (jobId: string) => {
    jobPath("stream", jobId);
    return jobId;
  };
  return client;
}
