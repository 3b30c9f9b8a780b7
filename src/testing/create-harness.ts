import pino, { type Logger } from "pino";
import { allowTypeScript } from "../cli/typescript.js";
import { type Client, createClient } from "../client/index.js";
import type { EndpointClientOf } from "../client/infer.js";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/index.js";
import {
  type Clock,
  describeHandler,
  type EndpointOptions,
  type Harness,
  type HarnessLimits,
  type HarnessOptions,
  type RateLimitOptions,
  startHarness,
  type WebhookOptions,
  type WorkerSpawner,
} from "../harness/index.js";
import { settle } from "../task-sink.js";
import { loadHandler, startWorker, type WorkerOptions } from "../worker/index.js";

/** One endpoint of a test harness: its handler and how many in-process workers serve it. */
export interface TestEndpoint extends Omit<EndpointOptions, "spawn" | "minWorkers"> {
  readonly id: string;
  /** The handler, as `defineHandler(...)` returned it. */
  readonly handler?: HandlerDefinition;
  /**
   * A handler file (`.ts`, `.mts`, `.mjs`); needed for `isolation: "thread"`. Alone (without
   * `handler`) it is imported, a TypeScript file through tsx (an optional peer, as for `runlet start`).
   */
  readonly handlerPath?: string;
  /** Workers started at once. @default 1 (0 when the endpoint has no handler) */
  readonly workers?: number;
}

// biome-ignore lint/suspicious/noExplicitAny: any definition, whatever its schema and result
type AnyDefinition = HandlerDefinition<any, any>;

/** Options of {@link createHarness}; `D` is the default endpoint's handler, which types `endpoint`. */
export interface CreateHarnessOptions<D extends AnyDefinition = HandlerDefinition> {
  /** The handler of the default endpoint (`"local"`), when `endpoints` is not given. */
  readonly handler?: D;
  /** The handler file of the default endpoint, when `endpoints` is not given. */
  readonly handlerPath?: string;
  /** Endpoints, each with its handler. @default [{ id: "local", handler | handlerPath }] */
  readonly endpoints?: readonly TestEndpoint[];
  /** Time for ttl, retention, timeouts, webhook retries. @default the real clock */
  readonly clock?: Clock;
  readonly limits?: HarnessLimits;
  /** Rate limits. @default disabled (tests opt in) */
  readonly rateLimits?: RateLimitOptions;
  readonly webhooks?: WebhookOptions;
  /** @default a random key */
  readonly apiKey?: string;
  /** How long the harness holds job-take and job-stop polls, ms. @default 5000 */
  readonly takeTimeoutMs?: number;
  /** How long `/stream` waits for a chunk, ms. @default 500 */
  readonly streamHoldMs?: number;
  /** Time without a ping after which a worker has lapsed, ms (docs/harness.md). @default 45000 */
  readonly heartbeatTimeoutMs?: number;
  /** `RUNPOD_GPU_TYPE_ID` of the workers (the `gpu=` query of their requests). @default "LOCAL" */
  readonly gpuTypeId?: string;
  /** Worker options passed to every in-process worker (grace periods, retry delays). */
  readonly worker?: Omit<Partial<WorkerOptions>, "env" | "handlerModule">;
  /** Logger of the harness and the workers. @default silent */
  readonly logger?: Logger;
  /** Serves the harness's live page too (`harness.dashboardUrl`); see `HarnessOptions.dashboard`. @default false */
  readonly dashboard?: HarnessOptions["dashboard"];
}

/** A started harness with in-process workers and a client, for one test. */
export interface TestHarness<D extends AnyDefinition = HandlerDefinition> {
  /** The harness itself (enqueue, job snapshots, recorded requests, faults). */
  readonly harness: Harness;
  /** A `runlet/client` pointed at the harness. */
  readonly client: Client;
  /** The client of the first endpoint, typed from `handler` (input, output, stream items). */
  readonly endpoint: EndpointClientOf<D>;
  readonly url: string;
  readonly apiKey: string;
  /** Stops the workers and the harness. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/** What a value is, for a message: "a function", "null", "an array", "a string". */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  const type = typeof value;
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/**
 * A spawner that runs `definition` in this process with `startWorker`. Each worker's readiness
 * (its `ready` event; a rejection if it stops first) goes into `readiness.list` while createHarness
 * waits on it (the first workers); later ones are not collected.
 */
function inProcessSpawner(
  definition: HandlerDefinition,
  handlerModule: string | undefined,
  options: CreateHarnessOptions,
  logger: Logger,
  harness: () => Harness | undefined,
  readiness: { list: Array<Promise<void>> | undefined },
): WorkerSpawner {
  return async (env, reportStartup) => {
    reportStartup({ type: "starting" });
    const worker = await startWorker(definition, {
      shutdownGraceMs: 2_000,
      flushTimeoutMs: 2_000,
      retryBaseMs: 20,
      retryCapMs: 500,
      logger,
      ...options.worker,
      env,
      ...(handlerModule === undefined ? {} : { handlerModule }),
    });
    // The dashboard's job view shows a job's handler metrics (a no-op without the dashboard).
    const report = ({
      jobId,
      metrics,
    }: {
      jobId: string;
      metrics: Readonly<Record<string, number | string>>;
    }) => {
      if (Object.keys(metrics).length > 0) harness()?.reportJobMetrics(jobId, metrics);
    };
    worker.on("finished", report);
    worker.on("failed", report);
    // The harness shows the worker starting until it is ready (docs/harness.md, "Workers starting").
    worker.on("phase", ({ phase, state, ms }) =>
      reportStartup({ type: "phase", phase, state, ...(ms === undefined ? {} : { ms }) }),
    );
    worker.on("setupProgress", ({ text }) => reportStartup({ type: "progress", text }));
    readiness.list?.push(
      new Promise<void>((resolve, reject) => {
        let ready = false;
        worker.on("ready", () => {
          ready = true;
          resolve();
        });
        settle(
          worker.stopped.then(({ reason, exitCode }) => {
            if (ready) return;
            reject(
              new RunletError(
                "RUNLET_HARNESS_CONFIG",
                `createHarness: worker ${worker.id} stopped before it was ready (${reason}, exit code ${exitCode}); its log says why (pass a logger to see it)`,
              ),
            );
          }),
          reject,
        );
      }),
    );
    worker.on("ready", ({ phases }) => reportStartup({ type: "ready", phases }));
    return { close: () => worker.close(), exited: worker.stopped };
  };
}

/**
 * Starts a harness with in-process workers running your handler, and a client for it. Resolves
 * once every worker is ready (its start-up done: health check, setup); rejects, closing the
 * harness, when a worker stops before that (an unfit worker, a failed setup).
 *
 * @example
 * await using h = await createHarness({ handler });
 * const record = await h.endpoint.runsync({ input: { text: "hi", upper: true } });
 * expect(record.output).toEqual({ echo: "HI" });
 */
export async function createHarness<D extends AnyDefinition = HandlerDefinition>(
  options: CreateHarnessOptions<D>,
): Promise<TestHarness<D>> {
  const logger = options.logger ?? silentLogger();
  const specs: readonly TestEndpoint[] = options.endpoints ?? [
    {
      id: "local",
      ...(options.handler === undefined ? {} : { handler: options.handler }),
      ...(options.handlerPath === undefined ? {} : { handlerPath: options.handlerPath }),
    },
  ];
  if (specs.length === 0)
    throw new RunletError("RUNLET_HARNESS_CONFIG", "createHarness needs at least one endpoint");
  const endpoints: Array<{ id: string } & EndpointOptions> = [];
  const readiness: { list: Array<Promise<void>> | undefined } = { list: [] };
  const definitions = new Map<string, HandlerDefinition>();
  let started: Harness | undefined;
  for (const spec of specs) {
    const { handler, handlerPath, workers, ...rest } = spec;
    if (handler !== undefined && !isHandlerDefinition(handler)) {
      throw new RunletError(
        "RUNLET_HANDLER_INVALID",
        `createHarness: the handler of endpoint "${spec.id}" must be a defineHandler(...) result, got ${kindOf(handler)}; wrap it: defineHandler({ handler })`,
      );
    }
    let definition = handler;
    if (definition === undefined && handlerPath !== undefined) {
      // Outside a TypeScript-aware runner (plain Node, a vitest run importing runlet from
      // node_modules), a .ts handler needs tsx's loader, as `runlet start` registers it.
      await allowTypeScript(handlerPath);
      definition = (await loadHandler(handlerPath)).definition;
    }
    const count = workers ?? (definition === undefined ? 0 : 1);
    if (definition === undefined && count > 0) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `endpoint "${spec.id}" has workers but no handler or handlerPath`,
      );
    }
    if (definition !== undefined) definitions.set(spec.id, definition);
    endpoints.push({
      ...rest,
      ...(definition === undefined
        ? {}
        : {
            spawn: inProcessSpawner(definition, handlerPath, options, logger, () => started, readiness),
            minWorkers: count,
            maxWorkers: Math.max(count, rest.maxWorkers ?? count, 1),
          }),
    });
  }
  const harnessOptions: HarnessOptions = {
    endpoints,
    takeTimeoutMs: options.takeTimeoutMs ?? 5_000,
    rateLimits: options.rateLimits ?? { disabled: true },
    logger,
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    ...(options.webhooks === undefined ? {} : { webhooks: options.webhooks }),
    ...(options.streamHoldMs === undefined ? {} : { streamHoldMs: options.streamHoldMs }),
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeoutMs: options.heartbeatTimeoutMs }),
    ...(options.gpuTypeId === undefined ? {} : { gpuTypeId: options.gpuTypeId }),
    ...(options.dashboard === undefined ? {} : { dashboard: options.dashboard }),
  };
  const harness = await startHarness(harnessOptions);
  started = harness;
  // The dashboard's form starts from each handler's input schema.
  if (harness.dashboardUrl !== undefined) {
    for (const [id, definition] of definitions) harness.describeEndpoint(id, describeHandler(definition));
  }
  try {
    await Promise.all(endpoints.map((ep) => harness.workersStarted(ep.id)));
    // Resolves once every worker's start-up (health check, setup) is done: a test's first job
    // does not carry a model's load (docs/harness.md, "createHarness").
    await Promise.all(readiness.list ?? []);
    readiness.list = undefined;
  } catch (err) {
    readiness.list = undefined;
    await harness.close();
    throw err;
  }
  const client = createClient({ apiKey: harness.apiKey, baseUrl: harness.url });
  return {
    harness,
    client,
    endpoint: client.endpoint<D>(endpoints[0]!.id) as EndpointClientOf<D>,
    url: harness.url,
    apiKey: harness.apiKey,
    close: () => harness.close(),
    [Symbol.asyncDispose]: () => harness.close(),
  };
}
