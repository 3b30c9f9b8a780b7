import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { ManualClock } from "../../src/harness/index.js";
import { defineHandler, type HandlerDefinition } from "../../src/index.js";
import type { DeliveredJob } from "../../src/protocol/index.js";
import { resolveWorkerConfig } from "../../src/worker/config.js";
import { ActiveJob } from "../../src/worker/job/active-job.js";
import type { JobDeps } from "../../src/worker/job/job-deps.js";
import { PlainScheduler } from "../../src/worker/job/scheduler.js";
import { take } from "../../src/worker/job/take-loop.js";
import { WorkerLifecycle } from "../../src/worker/lifecycle/lifecycle.js";
import { s3Settings } from "../../src/worker/lifecycle/worker-parts.js";
import { PlatformHttp } from "../../src/worker/platform/platform-http.js";
import { InProcessRunner } from "../../src/worker/runner/runner.js";
import { gate, memoryHarness, turn, waitFor } from "../support/workers.js";

/**
 * ActiveJob's state machine on its own: a job taken from the harness in memory, run by the real
 * in-process runner, its deadline and grace on a ManualClock; what it posts is read back from the
 * harness.
 */

interface Rig {
  readonly parts: JobDeps;
  readonly clock: ManualClock;
  readonly lifecycle: WorkerLifecycle;
  job(input?: unknown): Promise<DeliveredJob>;
  close(): Promise<void>;
}

async function rig(h: Harness, definition: HandlerDefinition): Promise<Rig> {
  const clock = new ManualClock();
  const config = resolveWorkerConfig({
    env: { ...h.workerEnv("local"), RUNPOD_ENDPOINT_ID: "local" },
    clock,
    retryBaseMs: 20,
    retryCapMs: 200,
  });
  const log = pino({ level: "silent" });
  const http = new PlatformHttp(config.apiKey, () => h.connect());
  const lifecycle = new WorkerLifecycle({
    log,
    clock,
    flushTimeoutMs: 1_000,
    exitOnHardStop: false,
    handleSignals: false,
    ping: undefined,
  });
  const settings = {
    identity: { hostname: config.hostname, workerId: config.podId },
    bucket: config.bucket,
    s3: s3Settings(config, definition),
  };
  const scheduler = new PlainScheduler(new InProcessRunner(definition, settings, log, clock));
  const parts: JobDeps = {
    config,
    definition,
    http,
    scheduler,
    heartbeat: undefined,
    log,
    giveUp: new AbortController().signal,
    s3: settings.s3,
    facts: lifecycle,
  };
  return {
    parts,
    clock,
    lifecycle,
    async job(input = {}) {
      h.enqueue("local", { input });
      const answer = await take(http, config.urls.take(1, false), new AbortController().signal);
      if (answer.kind !== "jobs") throw new Error(`no job taken: ${JSON.stringify(answer)}`);
      return answer.jobs[0]!;
    },
    close: () => http.close(),
  };
}

describe("ActiveJob", () => {
  it("goes running → settling → reporting and posts the handler's output", async () => {
    await using h = memoryHarness();
    const r = await rig(h, defineHandler({ handler: ({ input }) => ({ got: input }) }));
    const job = new ActiveJob(await r.job({ n: 1 }), r.parts);
    expect(job.state).toBe("running");
    await job.finished;
    expect(job.state).toBe("reporting");
    expect((await h.waitForJob(job.id)).output).toEqual({ got: { n: 1 } });
    await r.close();
  });

  it("goes running → timed-out → reporting at its deadline on the clock, and aborts the handler's signal", async () => {
    await using h = memoryHarness();
    let signal: AbortSignal | undefined;
    const r = await rig(
      h,
      defineHandler({
        executionTimeoutMs: 1_000,
        handler: async (ctx) => {
          signal = ctx.signal;
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
          return "late";
        },
      }),
    );
    const job = new ActiveJob(await r.job(), r.parts);
    await waitFor("the handler to run", () => signal !== undefined);
    await turn();
    // The deadline is the handler's start (epoch ms) plus the limit, armed on the clock.
    expect(job.state).toBe("running");
    r.clock.advance(1_000);
    expect(job.state).toBe("timed-out");
    expect(signal!.aborted).toBe(true);
    await job.finished;
    expect(job.state).toBe("reporting");
    expect((await h.waitForJob(job.id)).error).toBe("job timed out after 1000 ms (executionTimeout)");
    await r.close();
  });

  it("goes running → stopping → stopped on a job-stop and posts nothing for it", async () => {
    await using h = memoryHarness();
    const hold = gate();
    let started = false;
    const r = await rig(
      h,
      defineHandler({
        handler: async () => {
          started = true;
          await hold.promise;
          return "unwanted";
        },
      }),
    );
    const job = new ActiveJob(await r.job(), r.parts);
    await waitFor("the handler to run", () => started);
    job.stop();
    expect(job.state).toBe("stopping");
    expect(job.stopRequested).toBe(true);
    hold.open();
    await job.finished;
    expect(job.state).toBe("stopped");
    expect(h.requests({ route: "job-done" })).toEqual([]);
    await r.close();
  });

  it("refuses moves its table does not list, and ignores a stop once reported", async () => {
    await using h = memoryHarness();
    const r = await rig(h, defineHandler({ handler: () => "ok" }));
    const job = new ActiveJob(await r.job(), r.parts);
    expect(job.transition("stopped")).toBe(false);
    expect(job.transition("admitted")).toBe(false);
    await job.finished;
    expect(job.transition("running")).toBe(false);
    job.stop();
    expect(job.state).toBe("reporting");
    expect((await h.waitForJob(job.id)).output).toBe("ok");
    await r.close();
  });

  it("reports a shutdown failure when the grace runs out while its handler runs", async () => {
    await using h = memoryHarness();
    const hold = gate();
    let started = false;
    const r = await rig(
      h,
      defineHandler({
        handler: async () => {
          started = true;
          await hold.promise;
          return "too late";
        },
      }),
    );
    const job = new ActiveJob(await r.job(), r.parts);
    await waitFor("the handler to run", () => started);
    job.shutdown("the grace ran out");
    expect(job.state).toBe("reporting");
    hold.open();
    await job.finished;
    expect((await h.waitForJob(job.id)).error).toBe("worker shutting down: the grace ran out");
    await r.close();
  });

  it("tells the lifecycle of a runaway in-process handler after the grace, and still reports its timeout", async () => {
    await using h = memoryHarness();
    let started = false;
    const r = await rig(
      h,
      defineHandler({
        executionTimeoutMs: 1_000,
        hardStopGraceMs: 500,
        handler: async () => {
          started = true;
          await new Promise(() => undefined); // ignores its signal
        },
      }),
    );
    const job = new ActiveJob(await r.job(), r.parts);
    await waitFor("the handler to run", () => started);
    await turn();
    r.clock.advance(1_000);
    expect(job.state).toBe("timed-out");
    r.clock.advance(500);
    await waitFor("the lifecycle to be told", () => r.lifecycle.state === "draining");
    expect(r.lifecycle.info).toEqual({ reason: "runaway", exitCode: 1 });
    expect((await h.waitForJob(job.id)).error).toBe("job timed out after 1000 ms (executionTimeout)");
    await r.close();
  });
});
