import { z } from "zod";
import { RunletError } from "../errors.js";
import { describeValue, integerOption, parseOptions } from "../option-schema.js";
import type { BatchHandlerFunction, BatchJob, BatchOptions, BatchSettings } from "./batch-types.js";
import {
  type Concurrency,
  checkedDefinition,
  type HandlerDefinition,
  type HandlerFunction,
  type HandlerOptions,
} from "./define-handler.js";
import { batchOutputsOf, STREAMING_REFUSED } from "./execute-batch.js";

/**
 * `defineBatchHandler()`: a handler that takes many jobs in one call, as a GPU runs 32 inputs in
 * about the time of one. The worker gathers jobs into batches (docs/handler.md, "Batching"); each
 * job keeps its own validation, deadline, stop, progress and result.
 */

/** Options of {@link defineBatchHandler}: those of `defineHandler` that make sense for a batch, plus `batch`. */
export interface BatchHandlerOptions<Schema extends z.ZodType, Output, State = undefined>
  extends Omit<
    HandlerOptions<Schema, unknown, State>,
    "handler" | "concurrency" | "returnAggregateStream" | "streamCoalesceMs" | "maxBufferedStreamBytes"
  > {
  /** How a batch fills: `maxSize` jobs at most, `maxWaitMs` of waiting for them. @default { maxSize: 8, maxWaitMs: 10 } */
  batch?: BatchOptions;
  /**
   * Batches running at once, or `(current) => next`. The next batch fills while these run, so the
   * worker holds up to `(concurrency + 1) × maxSize` jobs. @default 1
   */
  concurrency?: Concurrency;
  /**
   * Runs one batch: gets every job's validated input (`inputs`) and returns one output per job, in
   * order. Its output type flows to `client.endpoint<typeof handler>()` as each job's output.
   */
  handler: BatchHandlerFunction<z.output<Schema>, Output, State>;
}

/** A checked batch handler definition: a `HandlerDefinition` whose jobs run in batches. */
export interface BatchHandlerDefinition<Schema extends z.ZodType = z.ZodType, Output = unknown>
  extends HandlerDefinition<Schema, Promise<Exclude<Output, Error>>> {
  readonly batch: BatchSettings;
  /**
   * A batch of one (what runs if anything calls the per-job handler). Its context is typed loosely
   * so a batch definition passes wherever a `HandlerDefinition` goes (startWorker, createHarness).
   */
  // biome-ignore lint/suspicious/noExplicitAny: see above; the batch handler itself is typed from the schema
  readonly handler: HandlerFunction<any, Promise<Exclude<Output, Error>>>;
}

/** Defaults of `batch`, in one place. */
export const BATCH_DEFAULTS = Object.freeze({ maxSize: 8, maxWaitMs: 10 });

/**
 * `batch`'s fields, checked in one parse with the limits in their messages. Built on first use, not
 * when the module loads: every worker loads this module, few define a batch handler (docs/benchmarks.md, "Cold start").
 */
function makeBatchSchema() {
  return z.object({
    maxSize: integerOption(1, BATCH_DEFAULTS.maxSize, 1_024),
    maxWaitMs: integerOption(0, BATCH_DEFAULTS.maxWaitMs, 60_000),
  });
}
let batchSchema: ReturnType<typeof makeBatchSchema> | undefined;

const NAME = "defineBatchHandler";

function invalid(message: string): RunletError {
  return new RunletError("RUNLET_HANDLER_INVALID", `${NAME}: ${message}`);
}

/** True for `function*` and `async function*`: they return a generator whatever they do. */
function isGeneratorFunction(fn: unknown): boolean {
  const name = (fn as { constructor?: { name?: unknown } }).constructor?.name;
  return name === "GeneratorFunction" || name === "AsyncGeneratorFunction";
}

/**
 * Describes a batch handler and checks its options (RUNLET_HANDLER_INVALID names the bad one).
 * A generator is refused here: streaming from a batch is not supported.
 *
 * @example
 * export default defineBatchHandler({
 *   input: z.object({ text: z.string() }),
 *   batch: { maxSize: 32, maxWaitMs: 10 },
 *   handler: async ({ inputs }) => (await model.embed(inputs.map((i) => i.text))).map((vector) => ({ vector })),
 * });
 */
export function defineBatchHandler<
  Schema extends z.ZodType = z.ZodUnknown,
  Output = unknown,
  State = undefined,
>(options: BatchHandlerOptions<Schema, Output, State>): BatchHandlerDefinition<Schema, Output> {
  if (typeof options !== "object" || options === null)
    throw invalid(`expected an options object, got ${describeValue(options)}`);
  const handler = options.handler;
  if (typeof handler !== "function") {
    throw invalid(`handler must be a function, got ${describeValue(handler)}`);
  }
  if (isGeneratorFunction(handler)) throw invalid(STREAMING_REFUSED);
  if (
    options.batch !== undefined &&
    (typeof options.batch !== "object" || options.batch === null || Array.isArray(options.batch))
  ) {
    throw invalid(
      `batch must be an object such as { maxSize: 32, maxWaitMs: 10 }, got ${describeValue(options.batch)}`,
    );
  }
  batchSchema ??= makeBatchSchema();
  const limits = parseOptions(
    batchSchema,
    { maxSize: options.batch?.maxSize, maxWaitMs: options.batch?.maxWaitMs },
    "RUNLET_HANDLER_INVALID",
    `${NAME}: batch.`,
  );
  const settings: BatchSettings = Object.freeze({ ...limits, handler });
  type Out = Exclude<Output, Error>;
  // Whatever calls the per-job handler gets a batch of one: same validation, same outputs rule.
  const one: HandlerFunction<z.output<Schema>, Promise<Out>, State> = async (ctx) => {
    const job: BatchJob = {
      id: ctx.job.id,
      raw: ctx.job.raw,
      signal: ctx.signal,
      deadline: ctx.deadline,
      log: ctx.log,
      progress: (value) => ctx.progress(value),
      metrics: ctx.metrics,
    };
    const returned = await handler({
      inputs: [ctx.input],
      jobs: [job],
      signal: ctx.signal,
      log: ctx.log,
      state: ctx.state,
      batch: { id: ctx.job.id, size: 1 },
    });
    const [place] = batchOutputsOf(returned, 1);
    if (place instanceof Error) throw place;
    return place as Out;
  };
  const definition = checkedDefinition<Schema, Promise<Out>, State>(options, one, settings, NAME);
  return Object.freeze({ ...definition, batch: settings });
}

/** True when `value` is a `defineBatchHandler()` result. */
export function isBatchDefinition(value: HandlerDefinition): value is BatchHandlerDefinition {
  return value.batch !== undefined;
}
