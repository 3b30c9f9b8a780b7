import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { z } from "zod";
import { type Clock, realClock } from "../clock.js";
import { type PlatformEnv, readPlatformEnv } from "../config.js";
import { RunletError } from "../errors.js";
import {
  boolean,
  booleanOption,
  describeValue,
  durationOption,
  integer,
  integerOption,
  nonEmptyString,
  parseOptions,
} from "../option-schema.js";
import { DEFAULT_MAX_RESULT_BYTES } from "../protocol/limits.js";
import type { RetryPolicy } from "../retry-policy.js";
import { operatorAllowsPrivateAddresses, PRIVATE_ADDRESSES_WARNING } from "../s3/private-address-switch.js";
import type { TelemetryOptions } from "../telemetry/settings.js";
import { type FitnessConfig, readFitnessConfig } from "./fitness/fitness-config.js";
import { type LbSettings, readLbSettings } from "./lb/lb-config.js";
import { pollRetryPolicy, postRetryPolicy } from "./platform/backoff.js";
import { type PlatformUrls, platformUrls } from "./platform/platform-urls.js";
import { readStartupBudget, type StartupBudget } from "./startup-budget.js";

/** Options of `startWorker()`. Every number is validated once; the merged config is frozen. */
export interface WorkerOptions {
  /**
   * The platform's environment (docs/protocol.md, "Environment"), usually `process.env`. Required: library code
   * never reads `process.env` itself.
   */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * OpenTelemetry traces and metrics over OTLP/HTTP (docs/observability.md): `true` or settings turn
   * them on, `false` off. @default on when OTEL_EXPORTER_OTLP_ENDPOINT (or a per-signal one) is set in `env`
   */
  telemetry?: boolean | TelemetryOptions;
  /** The logger. @default one from createLogger (JSON lines when RUNPOD_ENDPOINT_ID is set, the API key scrubbed) */
  logger?: Logger;
  /** Where runlet's own logger writes. @default process.stdout */
  logDestination?: NodeJS.WritableStream;
  /** After close() or SIGTERM, how long running jobs may still finish before they are aborted, in ms. @default 20_000 */
  shutdownGraceMs?: number;
  /** After the jobs ended, how long close() keeps retrying undelivered posts, in ms. @default 10_000 */
  flushTimeoutMs?: number;
  /** Longest single job-take or job-stop long poll, in ms. @default 90_000 */
  takeTimeoutMs?: number;
  /** A final output whose JSON is larger is offloaded to S3, or fails the job, in bytes. @default 10_485_760 (10 MiB) */
  maxResultBytes?: number;
  /** Install SIGTERM/SIGINT handlers: the first closes the worker and exits 0, a second exits 1 at once. @default false */
  handleSignals?: boolean;
  /**
   * Exit the process when an in-process handler ignores its aborted signal past its grace, after
   * reporting the job; also arms the heartbeat thread's watchdog for handlers that block the
   * main thread. When false the worker reports the job and closes itself instead. @default false
   */
  exitOnHardStop?: boolean;
  /** The handler module's path or file URL, loaded by isolation threads (`isolation: "thread"`). */
  handlerModule?: string;
  /** A file that serves jobs when started as a thread with `workerData.runletRole === "runner"` (a bundle passes its own `import.meta.url`). */
  threadEntry?: string;
  /**
   * The heartbeat thread's module (file URL): a bundle names its own heartbeat-thread.mjs.
   * @default runlet's worker/heartbeat-thread module
   */
  heartbeatEntry?: string;
  /** Smallest retry delay bound, in ms. @default 250 */
  retryBaseMs?: number;
  /** Largest retry delay, in ms. @default 15_000 */
  retryCapMs?: number;
  /**
   * Let `ctx.s3.download` fetch URLs on private and loopback addresses (local tests against a store
   * on 127.0.0.1). Wins over the handler's `allowPrivateAddresses`. @default the handler's, else false
   */
  allowPrivateAddresses?: boolean;
  /** Lifetime of presigned URLs, in seconds (1 to 604 800). Wins over the handler's. @default the handler's, else 604_800 (7 days) */
  presignExpiresSec?: number;
  /** Parent folder of each job's temporary folder (ctx.s3 downloads). @default os.tmpdir() */
  tmpRoot?: string;
  /**
   * Times the worker's poll pacing (pauses between takes and job-stop polls, the 1 s recheck of a
   * concurrency function while every slot is busy), job deadlines and
   * hard-stop graces, and back-off sleeps (take and post retries). Tests pass a `ManualClock`
   * (from `runlet/harness`) and advance it instead of sleeping; whether an empty take answer was
   * instant is judged on it too, so a clock that stands still makes the worker pause after every
   * empty answer until the clock moves. The long polls' own cap
   * (`takeTimeoutMs`), the shutdown grace and the flush deadline stay on real time.
   * @default the real clock
   */
  clock?: Clock;
  /**
   * Run the built-in fitness checks (memory, disk, network, CUDA, GPU; docs/fitness.md) before the
   * first take. `runlet start` and a bundle's entry turn them on, as the platform's Python SDK runs
   * them only on the platform; the `RUNPOD_SKIP_*` variables still turn each group off. The
   * handler's own `healthCheck` runs either way. @default false
   */
  fitnessChecks?: boolean;
  /**
   * The environment the handler's sidecars inherit (docs/models.md, "Sidecars"), usually
   * `process.env` (`runlet start` and a bundle pass it, as they pass `env`): `env` is added over
   * it, then the sidecar's own `env`; the worker's API key is never passed on. Library code never
   * reads `process.env`, so a test that wants its sidecar to find programs on `PATH` passes it here.
   * @default {} (the sidecar inherits `env` only)
   */
  sidecarBaseEnv?: Readonly<Record<string, string | undefined>>;
  /**
   * When start-up began, ms since the epoch: the start-up budget (`RUNPOD_INIT_TIMEOUT`, docs/fitness.md,
   * "The start-up budget") counts from it. `runlet start` and a bundle pass the process's start.
   * @default the time startWorker() was called
   */
  startedAt?: number;
  /**
   * How requests arrive (docs/load-balancing.md): `"queue"` takes jobs from the platform's queue
   * (RUNPOD_WEBHOOK_GET_JOB needed); `"lb"` serves them over HTTP on `PORT`, as a load-balancing
   * endpoint's worker (PORT, PORT_HEALTH, HEALTH_CHECK_PATH and RUNLET_LB_HOST read from `env`).
   * @default "queue"
   */
  mode?: "queue" | "lb";
  /**
   * Opens the main thread's connections to the platform in memory instead of over sockets: a test
   * passes `() => harness.connect()` of a `Harness.inMemory` (docs/harness.md, "A worker in
   * memory"). Each request then has a connection of its own and undici is never loaded. The
   * heartbeat thread still pings over sockets: an in-memory harness's `workerEnv` gives no ping
   * URL; `exitOnHardStop`, whose watchdog posts from that thread, is refused with it.
   * @default sockets
   */
  connect?: () => Duplex;
}

/** The worker's settings: the platform env plus options, merged and frozen. */
export interface WorkerConfig extends PlatformEnv {
  readonly jobTakeUrl: string;
  readonly jobDoneUrl: string;
  readonly shutdownGraceMs: number;
  readonly flushTimeoutMs: number;
  readonly takeTimeoutMs: number;
  readonly maxResultBytes: number;
  readonly handleSignals: boolean;
  readonly exitOnHardStop: boolean;
  readonly handlerModule: string | undefined;
  readonly threadEntry: string | undefined;
  readonly heartbeatEntry: string | undefined;
  readonly retryBaseMs: number;
  readonly retryCapMs: number;
  /** Posting results, progress and chunks: built once from retryBaseMs/retryCapMs. */
  readonly postRetry: RetryPolicy;
  /** The job-take and job-stop polls after a fault. */
  readonly pollRetry: RetryPolicy;
  /** Every platform URL, built once from the templates and ids. */
  readonly urls: PlatformUrls;
  readonly allowPrivateAddresses: boolean | undefined;
  readonly presignExpiresSec: number | undefined;
  readonly tmpRoot: string | undefined;
  readonly clock: Clock;
  readonly fitnessChecks: boolean;
  /** The fitness checks' thresholds, from the RUNPOD_* variables of docs/fitness.md. */
  readonly fitness: FitnessConfig;
  /** What the sidecars inherit beneath `env` (the `sidecarBaseEnv` option; `{}` without it). */
  readonly sidecarBaseEnv: Readonly<Record<string, string | undefined>>;
  /** The start-up budget: RUNPOD_INIT_TIMEOUT (else the platform's 7 minutes) from `startedAt`. */
  readonly startupBudget: StartupBudget;
  /** How requests arrive: the platform's queue, or a load balancer's HTTP. */
  readonly mode: "queue" | "lb";
  /** The load-balancing server's ports and health path; undefined in queue mode. */
  readonly lb: LbSettings | undefined;
  /** The platform's connections in memory (the `connect` option); undefined: sockets. */
  readonly connect: (() => Duplex) | undefined;
}

const optionsSchema = z.object({
  shutdownGraceMs: durationOption(0, 20_000),
  flushTimeoutMs: durationOption(0, 10_000),
  takeTimeoutMs: durationOption(1, 90_000),
  maxResultBytes: integerOption(1, DEFAULT_MAX_RESULT_BYTES),
  handleSignals: booleanOption(false),
  exitOnHardStop: booleanOption(false),
  handlerModule: nonEmptyString().optional(),
  threadEntry: nonEmptyString().optional(),
  heartbeatEntry: nonEmptyString().optional(),
  retryBaseMs: durationOption(1, 250),
  retryCapMs: durationOption(1, 15_000),
  allowPrivateAddresses: boolean().optional(),
  presignExpiresSec: integer(1, 604_800).optional(),
  tmpRoot: nonEmptyString().optional(),
  fitnessChecks: booleanOption(false),
});

/** Merges `options` and the env (RUNLET_CONFIG_INVALID names a bad value); local mode (no job-take URL) is an error here. */
export function resolveWorkerConfig(options: WorkerOptions): WorkerConfig {
  const env = readPlatformEnv(options.env);
  const operatorAllows = operatorAllowsPrivateAddresses(options.env ?? {});
  const fitness = readFitnessConfig(options.env);
  const startedAt = options.startedAt ?? Date.now();
  if (!Number.isFinite(startedAt) || startedAt <= 0) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `startWorker: startedAt must be a time in ms since the epoch, got ${describeValue(startedAt)}`,
    );
  }
  const startupBudget = readStartupBudget(options.env, startedAt);
  const checked = parseOptions(
    optionsSchema,
    {
      ...options,
      env: undefined,
      logger: undefined,
      logDestination: undefined,
      clock: undefined,
      telemetry: undefined,
      sidecarBaseEnv: undefined,
      startedAt: undefined,
      mode: undefined,
      connect: undefined,
    },
    "RUNLET_CONFIG_INVALID",
    "startWorker: ",
  );
  const sidecarBaseEnv = options.sidecarBaseEnv ?? {};
  if (typeof sidecarBaseEnv !== "object" || sidecarBaseEnv === null || Array.isArray(sidecarBaseEnv)) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `startWorker: sidecarBaseEnv must be an object of environment variables (usually process.env), got ${describeValue(sidecarBaseEnv)}`,
    );
  }
  const mode = options.mode ?? "queue";
  if (mode !== "queue" && mode !== "lb") {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `startWorker: mode must be "queue" or "lb", got ${describeValue(mode)}`,
    );
  }
  if (options.connect !== undefined && typeof options.connect !== "function") {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `startWorker: connect must be a function that returns a connection (a harness's connect), got ${describeValue(options.connect)}`,
    );
  }
  if (options.connect !== undefined && mode === "lb") {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      'startWorker: connect is for a queue worker\'s platform requests; a worker in mode "lb" has none (it serves HTTP on PORT)',
    );
  }
  if (options.connect !== undefined && checked.exitOnHardStop) {
    // The watchdog that comes with exitOnHardStop posts from the heartbeat thread over sockets of
    // its own: in memory nothing would receive a stuck job's failure.
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      "startWorker: connect cannot be combined with exitOnHardStop: its watchdog posts a stuck job's failure from the heartbeat thread over a socket, which reaches nothing in memory; test the watchdog against a harness on loopback",
    );
  }
  // What both modes' configs hold beyond the env and the checked options.
  const common = {
    connect: options.connect,
    handlerModule: checked.handlerModule,
    threadEntry: checked.threadEntry,
    heartbeatEntry: checked.heartbeatEntry,
    // The operator's RUNLET_ALLOW_PRIVATE_ADDRESSES=1 wins over the code's settings, with a warning at start.
    allowPrivateAddresses: operatorAllows ?? checked.allowPrivateAddresses,
    warnings: operatorAllows ? Object.freeze([...env.warnings, PRIVATE_ADDRESSES_WARNING]) : env.warnings,
    presignExpiresSec: checked.presignExpiresSec,
    tmpRoot: checked.tmpRoot,
    fitness,
    // Read when the sidecars start, as a child process reads its parent's environment then.
    sidecarBaseEnv,
    startupBudget,
    postRetry: postRetryPolicy(checked),
    pollRetry: pollRetryPolicy(checked),
    // Ref'd timers: a back-off sleep may be the one thing that keeps the worker process running.
    clock: options.clock ?? realClock({ unref: false }),
  };
  if (mode === "lb") {
    return Object.freeze({
      ...env,
      ...checked,
      ...common,
      mode,
      lb: readLbSettings(options.env),
      // No platform queue in this mode: the parts that would call it are not in the part list.
      jobTakeUrl: "",
      jobDoneUrl: "",
      urls: NO_PLATFORM_URLS,
    });
  }
  if (env.jobTakeUrl === undefined || env.jobDoneUrl === undefined) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      "startWorker needs the platform's RUNPOD_WEBHOOK_GET_JOB and RUNPOD_WEBHOOK_POST_OUTPUT; " +
        "locally, use `runlet dev` or `runlet test` instead",
    );
  }
  return Object.freeze({
    ...env,
    ...checked,
    ...common,
    mode,
    lb: undefined,
    jobTakeUrl: env.jobTakeUrl,
    jobDoneUrl: env.jobDoneUrl,
    urls: platformUrls({ ...env, jobTakeUrl: env.jobTakeUrl, jobDoneUrl: env.jobDoneUrl }),
  });
}

/**
 * The platform URLs of a load-balancing worker: there is no queue to call, and the parts that
 * would (take loop, job-stop poll, reports, heartbeat) are not in its part list; a call is a bug.
 */
const NO_PLATFORM_URLS: PlatformUrls = Object.freeze({
  take: noPlatform,
  stop: undefined,
  ping: undefined,
  done: noPlatform,
  stream: () => undefined,
});

function noPlatform(): never {
  throw new RunletError("RUNLET_WORKER_STATE", "a load-balancing worker has no platform queue to call");
}
