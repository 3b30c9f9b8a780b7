import { pino } from "pino";
import type { Harness } from "../../src/harness/index.js";
import { ManualClock } from "../../src/harness/index.js";
import type { HandlerDefinition } from "../../src/index.js";
import type { DeliveredJob } from "../../src/protocol/index.js";
import { resolveWorkerConfig, type WorkerConfig } from "../../src/worker/config.js";
import type { JobDeps } from "../../src/worker/job/job-deps.js";
import { PlainScheduler } from "../../src/worker/job/scheduler.js";
import { take } from "../../src/worker/job/take-loop.js";
import type { WorkerFacts } from "../../src/worker/lifecycle/lifecycle.js";
import { s3Settings } from "../../src/worker/lifecycle/worker-parts.js";
import { PlatformHttp } from "../../src/worker/platform/platform-http.js";
import { InProcessRunner } from "../../src/worker/runner/runner.js";
import { isInMemory } from "../support/inject.js";
import { type LogSink, logSink } from "../support/workers.js";

/**
 * What the unit tests of the worker's parts (outbox, job board) share: a harness endpoint "local"
 * reached in memory when `h` was made so (test/support/inject.ts), else over loopback, the
 * worker's config on a ManualClock (back-off bounds 100 ms → 800 ms), a real PlatformHttp, and
 * jobs taken from the harness, so every post lands on a job it knows.
 */
export interface PartsRig {
  readonly clock: ManualClock;
  readonly config: WorkerConfig;
  readonly http: PlatformHttp;
  readonly sink: LogSink;
  readonly log: pino.Logger;
  /** Enqueues `count` jobs and takes them all in one job-take. */
  take(count?: number, input?: unknown): Promise<DeliveredJob[]>;
  close(): Promise<void>;
}

export const RETRY_BASE_MS = 100;
export const RETRY_CAP_MS = 800;

export function partsRig(h: Harness): PartsRig {
  const clock = new ManualClock();
  const config = resolveWorkerConfig({
    env: { ...h.workerEnv("local"), RUNPOD_ENDPOINT_ID: "local" },
    clock,
    retryBaseMs: RETRY_BASE_MS,
    retryCapMs: RETRY_CAP_MS,
  });
  const http = new PlatformHttp(config.apiKey, isInMemory(h) ? () => h.connect() : undefined);
  const sink = logSink();
  const log = pino({ level: "debug" }, sink.stream);
  return {
    clock,
    config,
    http,
    sink,
    log,
    async take(count = 1, input = {}) {
      for (let i = 0; i < count; i++) h.enqueue("local", { input });
      const answer = await take(http, config.urls.take(count, false), new AbortController().signal, count);
      if (answer.kind !== "jobs" || answer.jobs.length !== count) {
        throw new Error(`expected ${count} jobs from one take, got ${JSON.stringify(answer)}`);
      }
      return answer.jobs;
    },
    close: () => http.close(),
  };
}

/** What every job of a board uses, built as the worker builds it, with the in-process runner. */
export function jobParts(
  r: PartsRig,
  definition: HandlerDefinition,
): { readonly parts: JobDeps; readonly stops: string[] } {
  const { config, http, log, clock } = r;
  const stops: string[] = [];
  // The facts a job reports to the worker's lifecycle, recorded by name.
  const facts: WorkerFacts = {
    lost: () => stops.push("lost"),
    runaway: () => stops.push("runaway"),
    unfit: () => stops.push("unfit"),
    refresh: () => stops.push("refresh"),
  };
  const settings = {
    identity: { hostname: config.hostname, workerId: config.podId },
    bucket: config.bucket,
    s3: s3Settings(config, definition),
  };
  const parts: JobDeps = {
    config,
    definition,
    http,
    scheduler: new PlainScheduler(new InProcessRunner(definition, settings, log, clock)),
    heartbeat: undefined,
    log,
    giveUp: new AbortController().signal,
    s3: settings.s3,
    facts,
  };
  return { parts, stops };
}
