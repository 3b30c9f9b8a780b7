import type { Logger } from "pino";
import { z } from "zod";
import {
  checkWarmCacheOptions,
  type WarmCacheOptions,
  type WarmCacheSettings,
} from "../cache/cache-options.js";
import { RunletError } from "../errors.js";
import {
  boolean,
  booleanOption,
  describeValue,
  durationOption,
  integer,
  integerOption,
  parseOptions,
} from "../option-schema.js";
import type { DeliveredJob } from "../protocol/index.js";
import type { JobS3 } from "../s3/types.js";
import {
  checkSidecars,
  type SidecarInfo,
  type SidecarOptions,
  type SidecarSettings,
} from "../sidecar/options.js";
import type { BatchSettings } from "./batch-types.js";
import type { JobMetrics } from "./metrics.js";

/**
 * `defineHandler()`: the one way a user describes a handler. Options are checked here, once, so a
 * bad option fails when the module loads rather than on the first job.
 */

/** Marks a definition so `runlet start` can check a module's default export (works across package copies). */
export const HANDLER_BRAND: unique symbol = Symbol.for("runlet.handler-definition") as never;

/** What `setup` receives (docs/handler.md, "Loading a model: setup and teardown"). */
export interface SetupContext {
  /** The worker's logger (in an isolation thread, that thread's). */
  readonly log: Logger;
  /** Fires when setup runs past `setupTimeoutMs` or the worker closes while it runs. */
  readonly signal: AbortSignal;
  /**
   * Reports how far setup is, as one short line (e.g. `"weights 40 %"`): logged, and sent as the
   * worker's `setupProgress` event, which `runlet dev`, the harness and the dashboard show.
   */
  progress(text: string): void;
  /**
   * The handler's sidecar (the first, with several), started and answering before setup runs:
   * `sidecar.url` is its base URL, to warm the server with a first request (docs/models.md,
   * "Sidecars"). Reading it without a `sidecar` option throws, as `ctx.sidecar` does.
   */
  readonly sidecar: SidecarInfo;
  /** Every sidecar of the handler by name (`sidecars.llm.url`); `{}` without any. */
  readonly sidecars: Readonly<Record<string, SidecarInfo>>;
}

/**
 * Loads what every job needs once (a model, a session, a pool), before the worker takes its first
 * job; what it returns is `ctx.state` in every handler call. Runs where the handler runs: once
 * in-process (shared by every concurrent job), or once per isolation thread.
 */
export type Setup<State> = (context: SetupContext) => State | Promise<State>;

/** Releases what `setup` made, at shutdown, after the running jobs ended (within the shutdown grace). */
export type Teardown<State> = (state: State) => unknown;

/** What a handler receives for one job. */
export interface HandlerContext<Input, State = undefined> {
  /**
   * What `setup` returned (the same object for every job run in this place: the process, or this
   * isolation thread); `undefined` without a `setup`.
   */
  readonly state: State;
  /** The job: its id and the job object exactly as the platform delivered it. */
  readonly job: { readonly id: string; readonly raw: DeliveredJob };
  /** The job's `input`, validated by the `input` schema (defaults applied). */
  readonly input: Input;
  /** Fires at the job's deadline, on a job-stop, or when the worker shuts down. `signal.reason` says which. */
  readonly signal: AbortSignal;
  /** When the job times out, in epoch ms. */
  readonly deadline: number;
  /** A pino child logger bound to `requestId: <job id>`. */
  readonly log: Logger;
  /** Posts an IN_PROGRESS update, delivered before the final result. Throws when `value` is not JSON. */
  progress(value: unknown): void;
  /** Named numbers and strings for this job; logged with `Finished.` and attached to stream chunks. */
  readonly metrics: JobMetrics;
  /** The S3-compatible store bound to this job (its `s3Config`, else `BUCKET_*`); created on first use. */
  readonly s3: JobS3;
  /**
   * Asks the platform to replace this worker once this job is reported: the job ends as it would
   * (its output or error), its final result carries `stopPod: true`, and the worker takes no
   * further job and stops as for `refreshWorker` (docs/handler.md, "Replacing the worker after a
   * job"). The port of a Python handler's `{"refresh_worker": true}`.
   *
   * @example
   * if (gpuLooksWedged()) ctx.refreshWorker();
   * return { text };
   */
  refreshWorker(): void;
  /**
   * The handler's sidecar (the first, with several): `ctx.sidecar.url` is its base URL
   * (docs/models.md, "Sidecars"). Reading it in a handler without a `sidecar` option throws.
   */
  readonly sidecar: SidecarInfo;
  /** Every sidecar of the handler by name (`ctx.sidecars.llm.url`); `{}` without any. */
  readonly sidecars: Readonly<Record<string, SidecarInfo>>;
}

/** A handler: sync, async, a generator or an async generator (each yielded value is one stream item). */
export type HandlerFunction<Input, Result = unknown, State = undefined> = (
  context: HandlerContext<Input, State>,
) => Result;

/** What a health check receives. */
export interface HealthCheckContext {
  /** Aborts when the check runs past `healthCheckTimeoutMs` or the worker closes. */
  readonly signal: AbortSignal;
  /** The worker's logger. */
  readonly log: Logger;
}

/**
 * A check of the worker's own fitness (a GPU that answers, a model that loaded). It fails when it
 * throws, rejects, returns `false`, or runs past `healthCheckTimeoutMs`; throw a `WorkerUnfitError`
 * to name the check in the unhealthy ping.
 */
export type HealthCheck = (context: HealthCheckContext) => unknown;

/** How concurrency is given: a fixed number, or a function of the current value called between takes. */
export type Concurrency = number | ((current: number) => number);

/** Options of {@link defineHandler}. */
export interface HandlerOptions<Schema extends z.ZodType, Result = unknown, State = undefined> {
  /** zod schema of the job's `input`; the handler's `input` is its output type. @default z.unknown() */
  input?: Schema;
  /**
   * Runs once before the worker takes its first job (in each isolation thread under
   * `isolation: "thread"`); its return value is `ctx.state`. A setup that throws or runs past
   * `setupTimeoutMs` takes no job: the worker pings unhealthy with `check=setup` and exits 1.
   * Write it before `handler` so `ctx.state` is typed from it. @default none
   */
  setup?: Setup<State>;
  /** Runs at shutdown with setup's state, after the running jobs ended, within the shutdown grace. @default none */
  teardown?: Teardown<State>;
  /** A setup that has not settled after this many ms has failed. @default 600_000 (10 minutes) */
  setupTimeoutMs?: number;
  /**
   * The function that runs each job: its result is the job's output; a generator's yields are
   * the stream. Its type flows to `client.endpoint<typeof handler>()`.
   */
  handler: HandlerFunction<z.output<Schema>, Result, State>;
  /** Jobs run at once by one worker, or `(current) => next`; a bad return is logged and ignored. @default 1 */
  concurrency?: Concurrency;
  /** A job's time limit when it carries no `policy.executionTimeout`, in ms. @default 600_000 */
  executionTimeoutMs?: number;
  /** Ask the platform to replace the worker after every job (`stopPod: true`). @default false */
  refreshWorker?: boolean;
  /** `"in-process"` runs jobs on the main thread; `"thread"` runs each in a worker thread that can be killed. @default "in-process" */
  isolation?: "in-process" | "thread";
  /** A streaming job's final result lists every yielded item instead of `[]`. @default false */
  returnAggregateStream?: boolean;
  /** Join string items yielded within this many ms of each other into one stream item (0: never). @default 0 */
  streamCoalesceMs?: number;
  /** How long a handler may ignore its aborted signal before it is hard-stopped, in ms. @default 5_000 */
  hardStopGraceMs?: number;
  /** Unposted stream bytes of one job above which the generator is paused. @default 4_194_304 (4 MiB) */
  maxBufferedStreamBytes?: number;
  /**
   * Checks the worker's fitness once before it takes its first job (and every
   * `healthCheckIntervalMs` after). On failure the worker pings
   * `status=unhealthy&check=<name>&reason=<message>` once, stops, and exits 1. @default none
   */
  healthCheck?: HealthCheck;
  /** Run `healthCheck` again this often, in ms, while the worker runs; 0: only at start. @default 0 */
  healthCheckIntervalMs?: number;
  /** A health check that has not settled after this many ms has failed. @default 30_000 */
  healthCheckTimeoutMs?: number;
  /** Lifetime of the presigned URLs `ctx.s3.upload` returns, in seconds (1 to 604 800). A worker's own `presignExpiresSec` wins. @default 604_800 (7 days) */
  presignExpiresSec?: number;
  /** Let `ctx.s3.download` fetch URLs on private and loopback addresses. A worker's own `allowPrivateAddresses` wins. @default false */
  allowPrivateAddresses?: boolean;
  /**
   * Folders mirrored on the network volume (docs/fitness.md, "Warm cache"): hydrated before the
   * first job, synced in the background after start-up and at shutdown. Needs the optional
   * package tar-stream. @default none
   */
  warmCache?: WarmCacheOptions;
  /**
   * A model server (or several, with distinct names) runlet starts before the first job, waits
   * for, logs, and stops at shutdown; its death makes the worker unfit (docs/models.md, "Sidecars").
   * @default none
   */
  sidecar?: SidecarOptions | readonly SidecarOptions[];
  /**
   * More paths served in load-balancing mode (docs/load-balancing.md, "Custom paths"): each takes
   * `POST` with the JSON body as the input. Ignored in queue mode. @default none
   */
  paths?: readonly string[];
}

/** A checked, frozen handler definition: what `export default defineHandler(...)` gives. */
export interface HandlerDefinition<Schema extends z.ZodType = z.ZodType, Result = unknown> {
  readonly [HANDLER_BRAND]: true;
  readonly input: Schema;
  // biome-ignore lint/suspicious/noExplicitAny: the state's type is the definition's own business; a definition passes wherever a HandlerDefinition goes
  readonly handler: HandlerFunction<z.output<Schema>, Result, any>;
  /** Undefined: no setup (`ctx.state` is undefined). */
  readonly setup: Setup<unknown> | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: as for `handler`
  readonly teardown: Teardown<any> | undefined;
  readonly setupTimeoutMs: number;
  readonly concurrency: Concurrency;
  readonly executionTimeoutMs: number;
  readonly refreshWorker: boolean;
  readonly isolation: "in-process" | "thread";
  readonly returnAggregateStream: boolean;
  readonly streamCoalesceMs: number;
  readonly hardStopGraceMs: number;
  readonly maxBufferedStreamBytes: number;
  readonly healthCheck: HealthCheck | undefined;
  readonly healthCheckIntervalMs: number;
  readonly healthCheckTimeoutMs: number;
  /** Undefined: the default (or the worker's option). */
  readonly presignExpiresSec: number | undefined;
  /** Undefined: the default (or the worker's option). */
  readonly allowPrivateAddresses: boolean | undefined;
  /** The checked `warmCache` option, or undefined without one. */
  readonly warmCache: WarmCacheSettings | undefined;
  /**
   * Set by `defineBatchHandler`: the worker gathers jobs into batches and calls `batch.handler`
   * once per batch (`handler` then runs a batch of one). Undefined for `defineHandler`.
   */
  readonly batch: BatchSettings | undefined;
  /** The checked `sidecar` option, as a list (empty: none). */
  readonly sidecars: readonly SidecarSettings[];
  /** The checked `paths` option (empty: none). */
  readonly paths: readonly string[];
}

/** Defaults of the options, in one place. */
export const HANDLER_DEFAULTS = Object.freeze({
  concurrency: 1,
  executionTimeoutMs: 600_000,
  refreshWorker: false,
  isolation: "in-process" as const,
  returnAggregateStream: false,
  streamCoalesceMs: 0,
  hardStopGraceMs: 5_000,
  maxBufferedStreamBytes: 4_194_304, // 4 MiB
  healthCheckIntervalMs: 0,
  healthCheckTimeoutMs: 30_000,
  setupTimeoutMs: 600_000,
  presignExpiresSec: 604_800, // 7 days, the SigV4 maximum
  allowPrivateAddresses: false,
});

function invalid(message: string, name = "defineHandler"): RunletError {
  return new RunletError("RUNLET_HANDLER_INVALID", `${name}: ${message}`);
}

const D = HANDLER_DEFAULTS;
/** The plain options, checked in one parse (the handler, schema and functions are checked above it). */
const plainOptionsSchema = z.object({
  executionTimeoutMs: durationOption(1, D.executionTimeoutMs),
  refreshWorker: booleanOption(D.refreshWorker),
  returnAggregateStream: booleanOption(D.returnAggregateStream),
  streamCoalesceMs: durationOption(0, D.streamCoalesceMs),
  hardStopGraceMs: durationOption(0, D.hardStopGraceMs),
  maxBufferedStreamBytes: integerOption(1, D.maxBufferedStreamBytes),
  healthCheckIntervalMs: durationOption(0, D.healthCheckIntervalMs),
  healthCheckTimeoutMs: durationOption(1, D.healthCheckTimeoutMs),
  setupTimeoutMs: durationOption(1, D.setupTimeoutMs),
  presignExpiresSec: integer(1, D.presignExpiresSec, "7 days, the SigV4 maximum").optional(),
  allowPrivateAddresses: boolean().optional(),
});

function isZodSchema(value: unknown): value is z.ZodType {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { safeParseAsync?: unknown }).safeParseAsync === "function" &&
    "_zod" in value
  );
}

/**
 * Describes a handler and checks its options (RUNLET_HANDLER_INVALID names the bad one).
 *
 * @example
 * export default defineHandler({
 *   input: z.object({ text: z.string() }),
 *   handler: ({ input }) => ({ echo: input.text }),
 * });
 */
export function defineHandler<Schema extends z.ZodType = z.ZodUnknown, Result = unknown, State = undefined>(
  options: HandlerOptions<Schema, Result, State>,
): HandlerDefinition<Schema, Result> {
  if (typeof options !== "object" || options === null)
    throw invalid(`expected an options object, got ${describeValue(options)}`);
  if (typeof options.handler !== "function") {
    throw invalid(`handler must be a function, got ${describeValue(options.handler)}`);
  }
  return Object.freeze(checkedDefinition(options, options.handler, undefined, "defineHandler"));
}

/**
 * The definition of `options` with every option but the handler checked (`name` starts each
 * message): shared by defineHandler and defineBatchHandler, which checks its handler itself.
 */
export function checkedDefinition<Schema extends z.ZodType, Result, State>(
  options: Omit<HandlerOptions<Schema, Result, State>, "handler">,
  handler: HandlerFunction<z.output<Schema>, Result, State>,
  batch: BatchSettings | undefined,
  name: string,
): HandlerDefinition<Schema, Result> {
  const input = options.input ?? (z.unknown() as unknown as Schema);
  if (!isZodSchema(input))
    throw invalid(`input must be a zod schema, got ${describeValue(options.input)}`, name);
  const prefix = `${name}: `;
  const concurrency =
    typeof options.concurrency === "function"
      ? options.concurrency
      : parseOptions(
          z.object({ concurrency: integerOption(1, D.concurrency, undefined, "or a function") }),
          { concurrency: options.concurrency },
          "RUNLET_HANDLER_INVALID",
          prefix,
        ).concurrency;
  const isolation = options.isolation ?? HANDLER_DEFAULTS.isolation;
  if (isolation !== "in-process" && isolation !== "thread") {
    throw invalid(`isolation must be "in-process" or "thread", got ${describeValue(isolation)}`, name);
  }
  for (const key of ["healthCheck", "setup", "teardown"] as const) {
    const fn = options[key];
    if (fn !== undefined && typeof fn !== "function") {
      throw invalid(`${key} must be a function, got ${describeValue(fn)}`, name);
    }
  }
  const plain = parseOptions(
    plainOptionsSchema,
    {
      executionTimeoutMs: options.executionTimeoutMs,
      refreshWorker: options.refreshWorker,
      returnAggregateStream: options.returnAggregateStream,
      streamCoalesceMs: options.streamCoalesceMs,
      hardStopGraceMs: options.hardStopGraceMs,
      maxBufferedStreamBytes: options.maxBufferedStreamBytes,
      healthCheckIntervalMs: options.healthCheckIntervalMs,
      healthCheckTimeoutMs: options.healthCheckTimeoutMs,
      setupTimeoutMs: options.setupTimeoutMs,
      presignExpiresSec: options.presignExpiresSec,
      allowPrivateAddresses: options.allowPrivateAddresses,
    },
    "RUNLET_HANDLER_INVALID",
    prefix,
  );
  return {
    [HANDLER_BRAND]: true,
    input,
    handler,
    concurrency,
    isolation,
    healthCheck: options.healthCheck,
    setup: options.setup as Setup<unknown> | undefined,
    teardown: options.teardown,
    ...plain,
    presignExpiresSec: plain.presignExpiresSec,
    allowPrivateAddresses: plain.allowPrivateAddresses,
    warmCache:
      options.warmCache === undefined
        ? undefined
        : checkWarmCacheOptions(options.warmCache, `${prefix}warmCache.`),
    batch,
    sidecars: checkSidecars(options.sidecar, name),
    paths: checkPaths(options.paths, name),
  };
}

/** Paths the load-balancing server answers itself: a handler's `paths` may not take them. */
export const RESERVED_PATHS: ReadonlySet<string> = new Set([
  "/run",
  "/runsync",
  "/stream",
  "/v1/models",
  "/v1/chat/completions",
  "/v1/completions",
]);

/** The `paths` option checked: a list of distinct paths starting with `/`, none of them reserved. */
function checkPaths(paths: unknown, name: string): readonly string[] {
  if (paths === undefined) return Object.freeze([]);
  if (!Array.isArray(paths) || paths.length > 64) {
    throw invalid(`paths must be a list of at most 64 paths, got ${describeValue(paths)}`, name);
  }
  const seen = new Set<string>();
  for (const [i, path] of paths.entries()) {
    if (typeof path !== "string" || !/^\/[^\s?#]{0,255}$/.test(path)) {
      throw invalid(
        `paths[${i}] must be a path starting with / (at most 256 characters, no spaces, ? or #), got ${describeValue(path)}`,
        name,
      );
    }
    if (RESERVED_PATHS.has(path)) throw invalid(`paths[${i}]: ${path} is served by runlet itself`, name);
    if (seen.has(path)) throw invalid(`paths[${i}]: ${path} is listed twice`, name);
    seen.add(path);
  }
  return Object.freeze([...seen]);
}

/** True when `value` is a `defineHandler()` result (checked by brand, so it works across package copies). */
export function isHandlerDefinition(value: unknown): value is HandlerDefinition {
  return (
    typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[HANDLER_BRAND] === true
  );
}
