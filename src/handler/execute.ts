import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { s3LoadError } from "../optional-peers.js";
import type { DeliveredJob } from "../protocol/index.js";
import { unconfiguredJobS3 } from "../s3/no-store.js";
import type { JobS3, JobS3Options } from "../s3/types.js";
import { sidecarContextOf } from "../sidecar/options.js";
import { chunkBody, StreamCoalescer, splitItemIter } from "../stream/index.js";
import { settle } from "../task-sink.js";
import type { TraceLink } from "../telemetry/link.js";
import type { HandlerContext, HandlerDefinition } from "./define-handler.js";
import { createJobMetrics, type JobMetrics } from "./metrics.js";
import { failedResult, type JobResult, type ReportIdentity, returnedResult, toJsonText } from "./outcome.js";
import { parseInput } from "./parse-input.js";
import { type Unfitness, unfitnessOf } from "./unfit.js";

/**
 * Runs one job's handler: validate input, call, drain a generator, normalise. The same code runs
 * in-process and inside an isolation thread; the caller supplies where progress and chunks go.
 */

/**
 * Where a running job's intermediate output goes. Injected, not imported, because there are two
 * implementations: on the main thread, the job's ActiveJob (worker/job/active-job.ts) queues them in its
 * outbox; inside an isolation thread, runRunnerThread (worker/runner/thread-entry.ts) sends them to the
 * main thread as messages, where ThreadRunner (worker/runner/thread-runner.ts) hands them to the
 * job's ActiveJob hooks.
 */
export interface ExecuteHooks {
  /** A progress update's output, as JSON text. */
  progress(outputJson: string): void;
  /**
   * Chunk bodies (JSON text, or its UTF-8 bytes for a large item's slices) to post, in order: one item's single chunk, or one chunk of a split
   * item (a large item's chunks come one call at a time). Resolves when the next chunk may be made:
   * once the unposted bytes are back within the stream budget, so memory stays bounded within an
   * item as well as between items.
   */
  chunks(bodies: readonly (string | Uint8Array)[], bytes: number): Promise<void>;
  /**
   * The handler returned a generator: the job streams, so its final post uses `isStream=true`
   * whatever it ends with (an error, a timeout, a shutdown), as the reference worker's does.
   */
  streaming?(): void;
  /** The input was checked, from `startedAt` (epoch ms): telemetry's validation span. */
  validated?(ok: boolean, startedAt: number): void;
  /**
   * Runs the handler (and the draining of its stream) and hands it the logger for `ctx.log`:
   * telemetry's one seam (src/telemetry), which runs it inside the job's span and calls `run` at
   * once, with the span's link (an isolation thread's run carries it across). Absent: as is.
   */
  wrapHandler?<T>(log: Logger, run: (log: Logger, link?: TraceLink) => Promise<T>): Promise<T>;
}

/** Everything {@link executeJob} needs. */
export interface ExecuteOptions {
  readonly definition: HandlerDefinition;
  readonly job: DeliveredJob;
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly log: Logger;
  readonly identity: ReportIdentity;
  /** Binds ctx.s3 to the job (the job's s3Config or the default store). */
  readonly s3: Omit<JobS3Options, "signal" | "log" | "jobId">;
  readonly hooks: ExecuteHooks;
  /** `ctx.state`: what setup returned where this job runs. */
  readonly state: unknown;
}

/** What a job ended with, plus its metrics for the `Finished.` line. */
export interface ExecuteOutcome {
  readonly result: JobResult;
  readonly metrics: Record<string, number | string>;
  /** Set when the handler threw a WorkerUnfitError: the worker must ping unhealthy and exit 1. */
  readonly unfit?: Unfitness | undefined;
  /** Set for a job that ran in a batch: which one, its size, and how long the job waited in it. */
  readonly batch?: BatchInfo | undefined;
}

/** Where a batched job ran (shown on the harness's dashboard). */
export interface BatchInfo {
  readonly id: string;
  readonly size: number;
  /** From the job joining the batch to the batch's start, ms. */
  readonly waitMs: number;
}

type CreateJobS3 = (options: JobS3Options) => JobS3;
let s3Module: Promise<CreateJobS3 | Error> | undefined;

/** Loads the S3 module once, and only for jobs that have a store: others never pay for the AWS SDK. */
function loadS3(): Promise<CreateJobS3 | Error> {
  s3Module ??= import("../s3/index.js").then((m) => m.createJobS3, s3LoadError);
  return s3Module;
}

export function isIterator(value: unknown): value is AsyncIterator<unknown> | Iterator<unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { next?: unknown }).next === "function" &&
    (Symbol.asyncIterator in value || Symbol.iterator in value)
  );
}

/**
 * Runs `options.job` through `options.definition`; never rejects: whatever the schema, the handler
 * or a hook throws becomes this job's failed result (every floating promise ends in one sink).
 */
export async function executeJob(options: ExecuteOptions): Promise<ExecuteOutcome> {
  try {
    return await runJob(options);
  } catch (err) {
    // runJob turns the handler's and the schema's throws into results itself; this is the sink for
    // anything else (a hook, ctx set-up), so the job fails instead of leaving an unhandled rejection.
    options.log.error({ err }, "running the job failed outside its handler");
    return { result: failedResult(err, options.identity, options.definition.refreshWorker), metrics: {} };
  }
}

async function runJob(options: ExecuteOptions): Promise<ExecuteOutcome> {
  const { definition, job, signal, log, identity, hooks } = options;
  const metrics = createJobMetrics();
  const stopPod = definition.refreshWorker;
  // ctx.refreshWorker(): this job's result, whatever it is, asks for the worker to be replaced.
  let refreshAsked = false;
  const validatingAt = Date.now();
  const parsed = await parseInput(definition.input, job.input);
  hooks.validated?.(parsed.ok, validatingAt);
  if (!parsed.ok) {
    return {
      result: { kind: "error", message: parsed.message, code: "RUNLET_INPUT_INVALID", stopPod },
      metrics: {},
    };
  }
  const hasStore = (job as { s3Config?: unknown }).s3Config !== undefined || options.s3.bucket !== undefined;
  // A job without a store never loads the S3 module (and the AWS SDK behind it).
  const createJobS3 = hasStore ? await loadS3() : undefined;
  let s3: JobS3 | undefined;
  const sidecars = sidecarContextOf(definition.sidecars);
  let handlerLog = log;
  const context: HandlerContext<unknown, unknown> = {
    job: Object.freeze({ id: job.id, raw: job }),
    state: options.state,
    input: parsed.data,
    signal,
    deadline: options.deadline,
    get log() {
      return handlerLog;
    },
    metrics,
    progress(value) {
      hooks.progress(toJsonText(value, "a progress value"));
    },
    refreshWorker() {
      refreshAsked = true;
    },
    // A getter, not a copy: reading ctx.sidecar without a sidecar option throws, saying so.
    get sidecar() {
      return sidecars.sidecar;
    },
    sidecars: sidecars.sidecars,
    get s3(): JobS3 {
      if (s3 !== undefined) return s3;
      if (createJobS3 === undefined) {
        s3 = unconfiguredJobS3({ ...options.s3, jobId: job.id, signal, log });
        return s3;
      }
      if (createJobS3 instanceof Error) {
        throw new RunletError("RUNLET_S3_NOT_CONFIGURED", `ctx.s3 is unavailable: ${createJobS3.message}`, {
          cause: createJobS3,
        });
      }
      const s3Config = (job as { s3Config?: JobS3Options["s3Config"] }).s3Config;
      s3 = createJobS3({ ...options.s3, s3Config, jobId: job.id, signal, log });
      return s3;
    },
  };
  let result: JobResult;
  let unfit: Unfitness | undefined;
  // A WorkerUnfitError fails its job like any error, and also asks for the worker to be replaced.
  const fail = (err: unknown): JobResult => {
    unfit ??= unfitnessOf(err);
    return failedResult(err, identity, stopPod || unfit !== undefined);
  };
  const wrap = hooks.wrapHandler ?? ((l: Logger, run: (l: Logger) => Promise<JobResult>) => run(l));
  try {
    result = await wrap(log, async (scoped) => {
      handlerLog = scoped;
      const returned = definition.handler(context);
      if (!isIterator(returned)) return returnedResult(await returned, stopPod);
      hooks.streaming?.();
      return drain(returned, { definition, metrics, hooks, signal }, fail, stopPod);
    });
  } catch (err) {
    result = fail(err);
  } finally {
    if (s3 !== undefined) {
      await s3.cleanup().catch((err: unknown) => log.warn({ err }, "ctx.s3 cleanup failed"));
    }
  }
  if (refreshAsked) result = { ...result, stopPod: true };
  return unfit === undefined
    ? { result, metrics: metrics.toJSON() }
    : { result, metrics: metrics.toJSON(), unfit };
}

/**
 * An item as it appears in the aggregated final output (`returnAggregateStream`): bytes become a
 * base64 string, as their stream chunks carry them (`encoding: "base64"`), instead of the
 * `{type: "Buffer", data: [...]}` that JSON.stringify makes of a Buffer.
 */
function aggregateItem(value: unknown): unknown {
  if (value instanceof Uint8Array) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
  }
  return value;
}

/** What {@link drain} reads besides the generator. */
interface DrainDeps {
  readonly definition: HandlerDefinition;
  /** The job's metrics, read as each item is split (every chunk carries them). */
  readonly metrics: JobMetrics;
  readonly hooks: ExecuteHooks;
  /** The job's signal: once it fires, no further chunk of a split item is made. */
  readonly signal: AbortSignal;
}

/** Drains a generator: each item becomes stream chunks (split to the chunk limit); the final output is `[]` or every item. */
async function drain(
  iterator: AsyncIterator<unknown> | Iterator<unknown>,
  { definition, metrics, hooks, signal }: DrainDeps,
  fail: (err: unknown) => JobResult,
  stopPod: boolean,
): Promise<JobResult> {
  const aggregate: unknown[] = [];
  let index = 0;
  let done = false;
  // Emits run one after another (a timer flush and the loop never interleave), keeping item order.
  let tail: Promise<void> = Promise.resolve();
  let emitFailure: unknown;
  const emit = (items: readonly unknown[]): Promise<void> => {
    tail = tail.then(async () => {
      for (const value of items) {
        if (emitFailure !== undefined) return;
        try {
          // Checks run here, before any chunk exists; the chunks themselves are made one at a time,
          // each only once the previous one is within the stream budget.
          const chunks = splitItemIter(value, index, metrics.toJSON());
          index += 1;
          if (definition.returnAggregateStream) aggregate.push(aggregateItem(value));
          for (const chunk of chunks) {
            // A stopped or timed-out job posts nothing more: stop making the rest of a large item.
            signal.throwIfAborted();
            const body = chunkBody(chunk);
            await hooks.chunks([body], Buffer.byteLength(body));
          }
        } catch (err) {
          emitFailure = err;
        }
      }
    });
    return tail;
  };
  const coalescer =
    definition.streamCoalesceMs > 0
      ? new StreamCoalescer({ windowMs: definition.streamCoalesceMs })
      : undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    const due = coalescer?.dueAt();
    if (coalescer === undefined || due === undefined || timer !== undefined) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        // emit() records its failure itself (emitFailure); a rejection here is one more of those.
        settle(emit(coalescer.poll()), (err) => {
          emitFailure ??= err;
        });
        arm();
      },
      Math.max(0, due - Date.now()),
    );
  };
  try {
    for (;;) {
      const step = await iterator.next();
      if (step.done) break;
      await emit(coalescer === undefined ? [step.value] : coalescer.push(step.value));
      if (emitFailure !== undefined) throw emitFailure;
      arm();
    }
    if (timer !== undefined) clearTimeout(timer);
    await emit(coalescer?.flush() ?? []);
    if (emitFailure !== undefined) throw emitFailure;
    done = true;
  } catch (err) {
    return fail(err);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    // Ending early (a bad item): let the generator run its finally blocks. Its own failure there
    // cannot change the result any more, so it is dropped.
    if (!done) await Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
  const json = definition.returnAggregateStream ? toJsonText(aggregate, "the aggregated stream") : "[]";
  return { kind: "output", json, stream: true, stopPod };
}
