import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { HANDLER_DEFAULTS, type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";
import type { Unfitness } from "../handler/unfit.js";
import { createLogger } from "../log/index.js";
import { type DeliveredJob, expandTemplate } from "../protocol/index.js";
import { backoffDelayMs, sleep } from "./backoff.js";
import { resolveWorkerConfig, type WorkerConfig, type WorkerOptions } from "./config.js";
import { type Executor, type ExecutorSettings, InProcessExecutor, type S3Settings } from "./executor.js";
import { runHealthCheck } from "./health.js";
import { Heartbeat } from "./heartbeat.js";
import { JobOutbox } from "./outbox.js";
import { PlatformHttp } from "./platform-http.js";
import { ActiveJob, doneUrl, failureBody } from "./run-job.js";
import { pollJobStops } from "./stop-poll.js";
import { take, takeUrl } from "./take.js";
import { defaultThreadEntryUrl, ThreadExecutor } from "./thread-executor.js";

/** Why and how a worker stopped. */
export interface WorkerStopInfo {
  /**
   * `closed`: close() was called; `signal`: SIGTERM/SIGINT; `runaway`: an in-process handler ignored
   * its deadline; `unhealthy`: a health check failed or code reported the worker unfit (§7).
   */
  readonly reason: "closed" | "signal" | "runaway" | "unhealthy";
  /** The exit code the process should end with: 0, or 1 after a runaway handler or unfitness. */
  readonly exitCode: number;
}

/** ctx.s3's settings: a worker option wins over the handler's, then runlet's default. */
function s3Settings(config: WorkerConfig, definition: HandlerDefinition): S3Settings {
  return Object.freeze({
    allowPrivateAddresses:
      config.allowPrivateAddresses ??
      definition.allowPrivateAddresses ??
      HANDLER_DEFAULTS.allowPrivateAddresses,
    presignExpiresSec:
      config.presignExpiresSec ?? definition.presignExpiresSec ?? HANDLER_DEFAULTS.presignExpiresSec,
    tmpRoot: config.tmpRoot,
  });
}

/** How long to wait on a 429 without Retry-After (the reference worker's figure). */
const SLOW_DOWN_MS = 5_000;
/** While every slot is busy, a concurrency function is consulted at least this often. */
const CONCURRENCY_RECHECK_MS = 1_000;

/**
 * The worker loop: takes jobs (never more than free slots), runs them, reports every result, and
 * shuts down gracefully. Create it with {@link startWorker}.
 */
export class Worker {
  readonly #config: WorkerConfig;
  readonly #definition: HandlerDefinition;
  readonly #log: Logger;
  readonly #http: PlatformHttp;
  readonly #executor: Executor;
  readonly #s3Settings: S3Settings;
  readonly #heartbeat: Heartbeat | undefined;
  readonly #jobs = new Map<string, ActiveJob>();
  readonly #orphans = new Set<Promise<unknown>>();
  readonly #closing = new AbortController();
  readonly #giveUp = new AbortController();
  #concurrency: number;
  #wake: (() => void) | undefined;
  #loops: Promise<void>;
  #closed: Promise<void> | undefined;
  #stopInfo: WorkerStopInfo = { reason: "closed", exitCode: 0 };
  #resolveStopped!: (info: WorkerStopInfo) => void;
  #removeSignalHandlers: (() => void) | undefined;
  #unfit: Unfitness | undefined;
  #unhealthyPing: Promise<void> | undefined;
  /** Resolves once the worker has fully stopped (after close(), a signal, or a runaway handler). */
  readonly stopped: Promise<WorkerStopInfo>;

  /** @internal use {@link startWorker}. */
  constructor(definition: HandlerDefinition, config: WorkerConfig, log: Logger) {
    this.#definition = definition;
    this.#config = config;
    this.#log = log;
    this.stopped = new Promise((resolve) => {
      this.#resolveStopped = resolve;
    });
    this.#concurrency = typeof definition.concurrency === "number" ? definition.concurrency : 1;
    this.#http = new PlatformHttp(config.apiKey);
    const settings: ExecutorSettings = {
      identity: { hostname: config.hostname, workerId: config.podId },
      bucket: config.bucket,
      s3: s3Settings(config, definition),
    };
    this.#s3Settings = settings.s3;
    this.#executor =
      definition.isolation === "thread"
        ? new ThreadExecutor({
            entryUrl: config.threadEntry ?? defaultThreadEntryUrl(),
            handlerModule: config.threadEntry === undefined ? config.handlerModule : undefined,
            log: {
              platform: config.endpointId !== undefined,
              level: log.level,
              secrets: config.apiKey ? [config.apiKey] : [],
            },
            settings,
          })
        : new InProcessExecutor(definition, settings);
    const pingUrl =
      config.pingUrl !== undefined && config.apiKey !== undefined
        ? expandTemplate(config.pingUrl, {
            podId: config.podId,
            gpuTypeId: config.gpuTypeId,
            id: config.podId,
          })
        : undefined;
    const watchdog = config.exitOnHardStop && definition.isolation === "in-process";
    this.#heartbeat =
      pingUrl !== undefined || watchdog
        ? new Heartbeat({ pingUrl, intervalMs: config.pingIntervalMs, apiKey: config.apiKey, watchdog, log })
        : undefined;
    if (config.handleSignals) this.#installSignalHandlers();
    log.info({ workerId: config.podId, isolation: definition.isolation }, "worker started");
    this.#loops = Promise.all([this.#takeLoop(), this.#stopLoop(), this.#healthLoop()]).then(() => undefined);
  }

  /** This worker's id (RUNPOD_POD_ID). */
  get id(): string {
    return this.#config.podId;
  }

  /** Ids of the jobs running or still being reported. */
  get jobIds(): string[] {
    return [...this.#jobs.keys()];
  }

  /** The current concurrency. */
  get concurrency(): number {
    return this.#concurrency;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Waits until a slot or the job list changes, `ms` passes, or the worker closes. */
  #waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.#closing.signal;
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
      const previous = this.#wake;
      this.#wake = () => {
        previous?.();
        done();
      };
    });
  }

  #updateConcurrency(): void {
    const fn = this.#definition.concurrency;
    if (typeof fn !== "function") return;
    let next: unknown;
    try {
      next = fn(this.#concurrency);
    } catch (err) {
      this.#log.error({ err }, "the concurrency function threw; keeping the current value");
      return;
    }
    if (typeof next !== "number" || !Number.isSafeInteger(next) || next < 1) {
      this.#log.error(
        { got: String(next) },
        `concurrency function must return an integer ≥ 1, got ${String(next)}; keeping ${this.#concurrency}`,
      );
      return;
    }
    if (next !== this.#concurrency)
      this.#log.info({ from: this.#concurrency, to: next }, "concurrency changed");
    this.#concurrency = next;
  }

  /** The handler's healthCheck, run once; a failure makes the worker unfit. False when it failed. */
  async #checkHealth(): Promise<boolean> {
    const unfit = await runHealthCheck(this.#definition, this.#log, this.#closing.signal);
    if (unfit === undefined) return true;
    void this.reportUnfit(unfit.check, unfit.reason);
    return false;
  }

  /** With healthCheckIntervalMs, checks again every interval while the worker runs. */
  async #healthLoop(): Promise<void> {
    const { healthCheck, healthCheckIntervalMs } = this.#definition;
    if (healthCheck === undefined || healthCheckIntervalMs === 0) return;
    while (await sleep(healthCheckIntervalMs, this.#closing.signal)) {
      if (!(await this.#checkHealth())) return;
    }
  }

  async #takeLoop(): Promise<void> {
    const config = this.#config;
    const closing = this.#closing.signal;
    // §7: a worker unfit from the start takes no job at all.
    if (!(await this.#checkHealth())) return;
    let faults = 0;
    while (!closing.aborted) {
      this.#updateConcurrency();
      const free = this.#concurrency - this.#jobs.size;
      if (free <= 0) {
        await this.#waitForChange(CONCURRENCY_RECHECK_MS);
        continue;
      }
      const url = takeUrl(config.jobTakeUrl, config, free, this.#jobs.size > 0);
      let answer: Awaited<ReturnType<typeof take>>;
      try {
        answer = await take(
          this.#http,
          url,
          AbortSignal.any([closing, AbortSignal.timeout(config.takeTimeoutMs)]),
        );
      } catch {
        // Our own long-poll cap or shutdown aborted the request: no job was handed over.
        continue;
      }
      if (answer.kind === "none") faults = 0;
      else if (answer.kind === "slow-down") {
        this.#log.warn({ waitMs: answer.waitMs ?? SLOW_DOWN_MS }, "job-take answered 429; waiting");
        await sleep(answer.waitMs ?? SLOW_DOWN_MS, closing);
      } else if (answer.kind === "fault") {
        const waitMs = backoffDelayMs(faults++, { baseMs: config.retryBaseMs, capMs: config.retryCapMs });
        this.#log.warn({ reason: answer.reason, waitMs }, "job-take failed; backing off");
        await sleep(waitMs, closing);
      } else {
        faults = 0;
        this.#accept(answer.jobs, answer.bad, free);
      }
    }
  }

  #accept(
    jobs: DeliveredJob[],
    bad: ReadonlyArray<{ id: string | undefined; reason: string }>,
    free: number,
  ): void {
    for (const item of bad) {
      this.#log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: item.id }, item.reason);
      if (item.id !== undefined) this.#failUnrun(item.id, item.reason);
    }
    let room = free;
    for (const job of jobs) {
      if (this.#jobs.has(job.id)) {
        this.#log.error(
          { code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id },
          "the platform delivered a job this worker is already running; ignoring the copy",
        );
        continue;
      }
      if (room <= 0) {
        const reason = `the platform delivered more jobs than the ${free} this worker asked for; this job was not run (retry it)`;
        this.#log.error({ code: "RUNLET_PROTOCOL_BAD_JOB", jobId: job.id }, reason);
        this.#failUnrun(job.id, reason);
        continue;
      }
      room -= 1;
      this.#startJob(job);
    }
  }

  /** Reports a job the worker will not run, so it is not left IN_PROGRESS. */
  #failUnrun(jobId: string, reason: string): void {
    const outbox = new JobOutbox({
      jobId,
      http: this.#http,
      log: this.#log.child({ requestId: jobId }),
      giveUp: this.#giveUp.signal,
      retryBaseMs: this.#config.retryBaseMs,
      retryCapMs: this.#config.retryCapMs,
    });
    outbox.final(doneUrl(this.#config, jobId, false), failureBody(reason), false);
    const done = outbox.done.finally(() => this.#orphans.delete(done));
    this.#orphans.add(done);
  }

  #startJob(job: DeliveredJob): void {
    const active = new ActiveJob(job, {
      config: this.#config,
      definition: this.#definition,
      http: this.#http,
      executor: this.#executor,
      heartbeat: this.#heartbeat,
      log: this.#log,
      giveUp: this.#giveUp.signal,
      s3: this.#s3Settings,
      onRunaway: (jobId) => this.#onRunaway(jobId),
      onUnfit: (unfit) => void this.reportUnfit(unfit.check, unfit.reason),
    });
    this.#jobs.set(job.id, active);
    this.#jobsChanged();
    void active.finished.finally(() => {
      this.#jobs.delete(job.id);
      this.#jobsChanged();
    });
  }

  #jobsChanged(): void {
    this.#heartbeat?.setJobs([...this.#jobs.keys()]);
    this.#notify();
  }

  #stopLoop(): Promise<void> {
    return pollJobStops({
      config: this.#config,
      http: this.#http,
      log: this.#log,
      closing: this.#closing.signal,
      running: () => this.#jobs.size,
      waitForChange: (ms) => this.#waitForChange(ms),
      stop: (jobId) => this.#jobs.get(jobId)?.stop(),
      slowDownMs: SLOW_DOWN_MS,
    });
  }

  #onRunaway(jobId: string): void {
    this.#log.error(
      { jobId },
      this.#config.exitOnHardStop
        ? "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and exits so the platform replaces it"
        : "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and stops taking jobs",
    );
    this.#stopInfo = { reason: "runaway", exitCode: 1 };
    void this.close().then(() => {
      if (this.#config.exitOnHardStop) process.exit(1);
    });
  }

  /**
   * Declares this worker unfit (worker-protocol §7): stops taking jobs, pings once with
   * `status=unhealthy&check=<check>&reason=<reason>`, then closes as close() does; `stopped`
   * resolves with `{reason: "unhealthy", exitCode: 1}`. A failed `healthCheck` or a handler's
   * `WorkerUnfitError` calls it. Idempotent: later calls return the same promise as close().
   *
   * @example
   * gpu.on("lost", () => void worker.reportUnfit("gpu", "CUDA device lost"));
   */
  reportUnfit(check: string, reason: string): Promise<void> {
    if (this.#unfit === undefined) {
      this.#unfit = { check, reason };
      this.#log.error(
        { code: "RUNLET_WORKER_UNFIT", check, reason },
        `the worker is unfit (${check}: ${reason}); pinging unhealthy, stopping, exit code 1`,
      );
      if (this.#stopInfo.reason !== "runaway") this.#stopInfo = { reason: "unhealthy", exitCode: 1 };
      // Stop taking before the ping goes out, so no job arrives at a worker that declared itself unfit.
      this.#closing.abort();
      this.#notify();
      this.#unhealthyPing = this.#heartbeat?.unhealthy(check, reason);
    }
    return this.close();
  }

  #installSignalHandlers(): void {
    let received = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      received += 1;
      if (received > 1) {
        this.#log.warn({ signal }, "second signal: exiting at once");
        process.exit(1);
      }
      this.#log.info({ signal }, "shutting down: finishing running jobs");
      if (this.#stopInfo.reason === "closed") this.#stopInfo = { reason: "signal", exitCode: 0 };
      void this.close().then(() => process.exit(this.#stopInfo.exitCode));
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    this.#removeSignalHandlers = () => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    };
  }

  /**
   * Stops taking jobs, lets running ones finish up to `shutdownGraceMs`, then aborts the rest and
   * reports each as failed, flushes every outbox (up to `flushTimeoutMs`) and releases everything.
   * Idempotent: every call returns the same promise. Does not exit the process.
   */
  close(): Promise<void> {
    this.#closed ??= this.#shutdown();
    return this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #shutdown(): Promise<void> {
    const { shutdownGraceMs, flushTimeoutMs } = this.#config;
    this.#closing.abort();
    this.#notify();
    try {
      await this.#loops;
      const running = [...this.#jobs.values()];
      const graceOver = new AbortController();
      const timer = setTimeout(() => graceOver.abort(), shutdownGraceMs);
      await Promise.race([
        // A job already reported (e.g. a runaway handler that was timed out) needs no grace.
        Promise.all(running.map((job) => Promise.race([job.finished, job.reported]))),
        new Promise((resolve) => graceOver.signal.addEventListener("abort", resolve, { once: true })),
      ]);
      clearTimeout(timer);
      for (const job of this.#jobs.values()) {
        job.shutdown(`the job did not finish within the ${shutdownGraceMs} ms shutdown grace`);
      }
      const flushTimer = setTimeout(() => this.#giveUp.abort(), flushTimeoutMs);
      await Promise.all([...[...this.#jobs.values()].map((job) => job.reported), ...this.#orphans]);
      clearTimeout(flushTimer);
    } finally {
      this.#giveUp.abort();
      this.#removeSignalHandlers?.();
      // The heartbeat thread sends the unhealthy ping: let it finish before the thread ends.
      await this.#unhealthyPing;
      const steps = [this.#executor.close(), this.#heartbeat?.close(), this.#http.close()];
      for (const result of await Promise.allSettled(steps)) {
        if (result.status === "rejected") this.#log.warn({ err: result.reason }, "a clean-up step failed");
      }
      this.#log.info({ reason: this.#stopInfo.reason }, "worker stopped");
      this.#resolveStopped(this.#stopInfo);
    }
  }
}

/**
 * Starts a worker for `definition` against the platform described by `options.env`.
 *
 * @example
 * const worker = await startWorker(handler, { env: process.env, handleSignals: true });
 * await worker.stopped;
 */
export async function startWorker(definition: HandlerDefinition, options: WorkerOptions): Promise<Worker> {
  if (!isHandlerDefinition(definition)) {
    throw new RunletError("RUNLET_HANDLER_INVALID", "startWorker needs a defineHandler(...) result");
  }
  const config = resolveWorkerConfig(options);
  if (
    definition.isolation === "thread" &&
    config.handlerModule === undefined &&
    config.threadEntry === undefined
  ) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      'isolation: "thread" needs handlerModule (the handler file) or threadEntry (a bundle\'s own file) so threads can load the handler',
    );
  }
  const log =
    options.logger ??
    createLogger({
      platform: config.endpointId !== undefined,
      level: config.logLevel,
      ...(options.logDestination === undefined ? {} : { destination: options.logDestination }),
      secrets: config.apiKey === undefined ? [] : [config.apiKey],
    });
  return new Worker(definition, config, log);
}
