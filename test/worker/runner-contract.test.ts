import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { BatchInfo, ExecuteOutcome } from "../../src/handler/execute.js";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler, defineHandler, type HandlerDefinition } from "../../src/index.js";
import type { DeliveredJob } from "../../src/protocol/index.js";
import type { RunHandle } from "../../src/worker/runner/run.js";
import { InProcessRunner, type Runner, type RunnerSettings } from "../../src/worker/runner/runner.js";
import { defaultThreadEntryUrl, ThreadRunner } from "../../src/worker/runner/thread-runner.js";
import { MANY_BATCH, MANY_TIMEOUT_MS } from "../fixtures/contract-batch-many.js";
import { COMMON, contractInput, work, workEach } from "../fixtures/contract-handlers.js";
import { signalCensus } from "../support/signal-census.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { memoryHarness, turn, waitFor, workerFor } from "../support/workers.js";

/**
 * The contract every runner keeps (docs/architecture.md, "A run of N ≥ 1 jobs"): the same cases for
 * the in-process runner and isolation threads, with a plain handler and a batch handler — output, a
 * throw, an output JSON cannot carry, the deadline, a job-stop, and a handler that ignores its
 * signal (hard stop), and signal leaks (nothing kept per job on a signal that outlives it). Workers
 * run against the harness in memory (the subject is the runner, not the socket); deadlines and
 * graces run on a ManualClock. Then the Runner interface itself with real runs of five jobs, for
 * every runner and both kinds of handler: each job's output, failure and abort land on that job
 * alone (an abort that stops the whole run, or reaches the wrong index, shows), and one worker's
 * run per runner of a batch taken from the harness, one job of it stopped by a job-stop.
 */

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}.ts`, import.meta.url));

interface Combo {
  readonly name: string;
  readonly thread: boolean;
  definition(): Promise<HandlerDefinition>;
  readonly handlerModule?: string;
}

const COMBOS: readonly Combo[] = [
  {
    name: "in-process, one job a run",
    thread: false,
    definition: async () =>
      defineHandler({ ...COMMON, input: contractInput, handler: (ctx) => work(ctx.input, ctx, false) }),
  },
  {
    name: "in-process, batches",
    thread: false,
    definition: async () =>
      defineBatchHandler({
        ...COMMON,
        input: contractInput,
        batch: { maxSize: 1, maxWaitMs: 0 },
        handler: async ({ inputs, jobs }) => [await work(inputs[0]!, jobs[0]!, false)],
      }),
  },
  {
    name: "isolation thread, one job a run",
    thread: true,
    definition: async () => (await import("../fixtures/contract-single.js")).default,
    handlerModule: fixture("contract-single"),
  },
  {
    name: "isolation thread, batches",
    thread: true,
    definition: async () => (await import("../fixtures/contract-batch.js")).default,
    handlerModule: fixture("contract-batch"),
  },
];

/** Rounds of four jobs between the two counts of the signal-leak case. */
const LEAK_ROUNDS = 10;

/** Runs one job to its end and returns it. */
async function run(h: Harness, input: Record<string, unknown>) {
  return h.waitForJob(h.enqueue("local", { input }), { timeoutMs: THREAD_START_MS });
}

/** Enqueues a job that posts progress and then waits; resolves once its deadline timer is armed. */
async function waiting(h: Harness, mode: "wait" | "ignore"): Promise<string> {
  const id = h.enqueue("local", { input: { mode } });
  await waitFor("the job's progress", () => h.job(id)?.progress.length === 1, THREAD_START_MS);
  await turn();
  return id;
}

describe.each(COMBOS)("runner contract: $name", (combo) => {
  const allowance = combo.thread ? THREAD_TEST_MS : 30_000;
  it(
    "reports output, a throw and an unserializable output per job, and serves on",
    async () => {
      await using h = memoryHarness();
      await using _w = await workerFor(h, await combo.definition(), {
        ...(combo.handlerModule === undefined ? {} : { handlerModule: combo.handlerModule }),
      });
      expect((await run(h, { n: 21 })).output).toBe(42);
      const thrown = await run(h, { mode: "throw" });
      expect([thrown.status, String(thrown.error)]).toEqual(["FAILED", expect.stringContaining("boom")]);
      const bad = await run(h, { mode: "bad" });
      expect(bad.status).toBe("FAILED");
      expect(String(bad.error)).toMatch(/BigInt/i);
      expect((await run(h, { n: 2 })).output).toBe(4);
    },
    allowance,
  );

  it(
    "aborts at the deadline and reports the timeout; posts nothing for a job-stop; serves on",
    async () => {
      await using h = memoryHarness();
      const clock = new ManualClock();
      await using _w = await workerFor(h, await combo.definition(), {
        clock,
        ...(combo.handlerModule === undefined ? {} : { handlerModule: combo.handlerModule }),
      });
      const late = await waiting(h, "wait");
      clock.advance(1_000);
      expect((await h.waitForJob(late, { timeoutMs: THREAD_START_MS })).error).toBe(
        "job timed out after 1000 ms (executionTimeout)",
      );
      const stopped = await waiting(h, "wait");
      h.stopJob(stopped);
      expect((await run(h, { n: 5 })).output).toBe(10);
      expect(
        h
          .requests({ route: "job-done" })
          .filter((r) => r.path.includes(encodeURIComponent(stopped)) && !r.body.includes('"IN_PROGRESS"')),
      ).toEqual([]);
    },
    allowance,
  );

  it(
    combo.thread
      ? "hard-stops a handler that ignores its signal, reports the timeout and serves on"
      : "reports the timeout of a handler that ignores its signal, then stops the worker (runaway)",
    async () => {
      await using h = memoryHarness();
      const clock = new ManualClock();
      const w = await workerFor(h, await combo.definition(), {
        clock,
        ...(combo.handlerModule === undefined ? {} : { handlerModule: combo.handlerModule }),
      });
      const runaway = await waiting(h, "ignore");
      clock.advance(1_000);
      await turn();
      clock.advance(500);
      expect((await h.waitForJob(runaway, { timeoutMs: THREAD_START_MS })).error).toBe(
        "job timed out after 1000 ms (executionTimeout)",
      );
      if (combo.thread) {
        expect((await run(h, { n: 3 })).output).toBe(6);
        await w.close();
      } else {
        expect(await w.stopped).toEqual({ reason: "runaway", exitCode: 1 });
      }
    },
    allowance,
  );

  it(
    "keeps no listener, onAbort callback or linked signal per job on any signal that outlives the job",
    async () => {
      await using h = memoryHarness();
      // Real time: a ManualClock would hold the take loop's pause after an empty answer too.
      await using _w = await workerFor(h, await combo.definition(), {
        ...(combo.handlerModule === undefined ? {} : { handlerModule: combo.handlerModule }),
      });
      /** One job of each ending: output, a throw, an output JSON cannot carry, a job-stop (its signal aborted). */
      const round = async (): Promise<void> => {
        expect((await run(h, { n: 1 })).output).toBe(2);
        expect((await run(h, { mode: "throw" })).status).toBe("FAILED");
        expect((await run(h, { mode: "bad" })).status).toBe("FAILED");
        h.stopJob(await waiting(h, "wait"));
      };
      /** What signals hold where the handler runs (from a job) and on the main thread, at the same point. */
      const held = async () => {
        const there = (await run(h, { mode: "census" })).output as { most: number; signals: number };
        return { there, main: signalCensus() };
      };
      for (let i = 0; i < 2; i++) await round();
      const before = await held();
      for (let i = 0; i < LEAK_ROUNDS; i++) {
        console.log("round", i);
        await round();
      }
      const after = await held();
      // The census ran where the handler runs: it saw that thread's signals.
      expect(after.there.signals).toBeGreaterThan(0);
      // A part that keeps one thing per job adds 4 × LEAK_ROUNDS here; the slack is a request in flight.
      expect(after.there.most).toBeLessThanOrEqual(before.there.most + 2);
      expect(after.main.most).toBeLessThanOrEqual(before.main.most + 2);
    },
    allowance,
  );
});

const MANY_MODULE = fileURLToPath(new URL("../fixtures/contract-batch-many.ts", import.meta.url));
const silent = pino({ level: "silent" });
const settings: RunnerSettings = {
  identity: { hostname: "test", workerId: "w" },
  bucket: undefined,
  s3: { allowPrivateAddresses: false, presignExpiresSec: 3600, tmpRoot: undefined },
};

/** The in-process twin of test/fixtures/contract-batch-many.ts. */
const inProcessMany = defineBatchHandler({
  ...COMMON,
  executionTimeoutMs: MANY_TIMEOUT_MS,
  input: contractInput,
  batch: MANY_BATCH,
  handler: async ({ inputs, jobs }) => workEach(inputs, jobs, false),
});

function threadRunner(handlerModule: string): ThreadRunner {
  return new ThreadRunner({
    entryUrl: defaultThreadEntryUrl(),
    handlerModule,
    log: { platform: false, level: "silent", secrets: [] },
    settings,
    logger: silent,
    onUnfit: (check, reason) => {
      throw new Error(`the isolation thread is unfit (${check}): ${reason}`);
    },
    clock: new ManualClock(),
    setup: { present: false, timeoutMs: 60_000 },
  });
}

interface RunnerKind {
  readonly name: string;
  readonly thread: boolean;
  /** A batch handler's run (one call for every job), or a plain handler's (one call each). */
  readonly batch: boolean;
  definition(): Promise<HandlerDefinition>;
  runner(definition: HandlerDefinition): Runner;
}

const RUNNER_KINDS: readonly RunnerKind[] = [
  {
    name: "in-process, a plain handler's run",
    thread: false,
    batch: false,
    definition: async () =>
      defineHandler({ ...COMMON, input: contractInput, handler: (ctx) => work(ctx.input, ctx, false) }),
    runner: (definition) => new InProcessRunner(definition, settings, silent, new ManualClock()),
  },
  {
    name: "in-process, a batch",
    thread: false,
    batch: true,
    definition: async () => inProcessMany,
    runner: (definition) => new InProcessRunner(definition, settings, silent, new ManualClock()),
  },
  {
    name: "isolation thread, a plain handler's run",
    thread: true,
    batch: false,
    definition: async () => (await import("../fixtures/contract-single.js")).default,
    runner: () => threadRunner(fixture("contract-single")),
  },
  {
    name: "isolation thread, a batch",
    thread: true,
    batch: true,
    definition: async () => (await import("../fixtures/contract-batch-many.js")).default,
    runner: () => threadRunner(MANY_MODULE),
  },
];

/** The run of five every case runs: an output, a throw, two jobs that wait for their own signal, an output. */
const FIVE = [{ n: 1 }, { mode: "throw" }, { mode: "wait", n: 2 }, { mode: "wait", n: 3 }, { n: 3 }] as const;

/** What a job's outcome says, in short: its output's JSON or its error (a plain job's error is the platform's JSON). */
function resultOf(outcome: ExecuteOutcome): string {
  if (outcome.result.kind === "output") return `output ${outcome.result.json}`;
  const { message } = outcome.result;
  if (!message.startsWith("{")) return `error ${message}`;
  return `error ${(JSON.parse(message) as { error_message: string }).error_message}`;
}

const openRunners: Runner[] = [];
afterEach(async () => {
  await Promise.all(openRunners.splice(0).map((r) => r.close()));
});

describe.each(RUNNER_KINDS)("runner contract, runs of N: $name", (kind) => {
  const allowance = kind.thread ? THREAD_TEST_MS : 30_000;

  it(
    "gives each job of a run of five its own outcome, and aborts only the job named",
    async () => {
      const definition = await kind.definition();
      const runner = kind.runner(definition);
      openRunners.push(runner);
      expect(runner.canHardStop).toBe(kind.thread);
      expect(
        await runner.start({ closing: new AbortController().signal, progress: () => undefined }),
      ).toEqual({
        ok: true,
        state: undefined,
      });
      const progressed: number[] = [];
      const launched: number[] = [];
      const run: RunHandle = runner.run({
        batchId: kind.batch ? "batch-1" : undefined,
        log: silent,
        jobs: FIVE.map((input, index) => ({
          job: { id: `job-${index}`, input } as DeliveredJob,
          timeoutMs: MANY_TIMEOUT_MS,
          log: silent,
          hooks: { progress: () => progressed.push(index), chunks: async () => undefined },
          onLaunch: () => launched.push(index),
        })),
      });
      // Every job's onLaunch was called before run() returned, before any handler could run.
      expect(launched).toEqual([0, 1, 2, 3, 4]);
      // Both waiting jobs are in the handler (each posted its progress).
      await waitFor("the two waiting jobs' progress", () => progressed.length === 2, THREAD_START_MS);
      expect(progressed.sort()).toEqual([2, 3]);
      // One at a time, in order: had job 2's abort stopped the whole run (or reached another
      // index), job 3 would end with job 2's reason before its own abort is sent.
      run.abort(new Error("job 2 stopped"), 2);
      await turn();
      run.abort(new Error("job 3 stopped"), 3);
      const outcomes = await run.outcomes;
      if (outcomes === "killed") throw new Error("the run was killed");
      expect(outcomes.map(resultOf)).toEqual([
        "output 2",
        "error boom",
        "error job 2 stopped",
        "error job 3 stopped",
        "output 6",
      ]);
      // A late abort or hard stop of an ended run does nothing (no throw, no signal fired, no thread ended).
      run.abort(new Error("too late"), 0);
      run.abort(new Error("too late"));
      expect(await run.hardStop()).toBe(true);
    },
    allowance,
  );

  it(
    "ends every waiting job of a run with one abort of the run",
    async () => {
      const definition = await kind.definition();
      const runner = kind.runner(definition);
      openRunners.push(runner);
      await runner.start({ closing: new AbortController().signal, progress: () => undefined });
      const progressed: number[] = [];
      const inputs = [{ mode: "wait", n: 1 }, { n: 2 }, { mode: "wait", n: 3 }] as const;
      const run = runner.run({
        batchId: kind.batch ? "batch-2" : undefined,
        log: silent,
        jobs: inputs.map((input, index) => ({
          job: { id: `all-${index}`, input } as DeliveredJob,
          timeoutMs: MANY_TIMEOUT_MS,
          log: silent,
          hooks: { progress: () => progressed.push(index), chunks: async () => undefined },
          onLaunch: () => undefined,
        })),
      });
      await waitFor("the waiting jobs' progress", () => progressed.length === 2, THREAD_START_MS);
      // A batch's run signal is the batch's own (its jobs wait on theirs): each job is let go by index.
      if (kind.batch) for (const index of [0, 2]) run.abort(new Error("all stopped"), index);
      else run.abort(new Error("all stopped"));
      const outcomes = await run.outcomes;
      if (outcomes === "killed") throw new Error("the run was killed");
      expect(outcomes.map(resultOf)).toEqual(["error all stopped", "output 4", "error all stopped"]);
    },
    allowance,
  );
});

describe.each(RUNNER_KINDS.filter((kind) => kind.batch))(
  "runner contract, a batch a worker took from the harness: $name",
  (kind) => {
    it(
      "runs a batch taken from the harness, one job of it stopped by a job-stop",
      async () => {
        await using h = memoryHarness();
        const ids = FIVE.filter((input) => !("mode" in input && input.mode === "wait" && input.n === 3)).map(
          (input) => h.enqueue("local", { input }),
        );
        const [ok1, thrown, waiting, ok3] = ids as [string, string, string, string];
        await using w = await workerFor(h, await kind.definition(), {
          ...(kind.thread ? { handlerModule: MANY_MODULE } : {}),
        });
        const batches = new Map<string, BatchInfo | undefined>();
        w.on("finished", ({ jobId, batch }) => batches.set(jobId, batch));
        w.on("failed", ({ jobId, batch }) => batches.set(jobId, batch));
        await waitFor(
          "the waiting job's progress",
          () => h.job(waiting)?.progress.length === 1,
          THREAD_START_MS,
        );
        h.stopJob(waiting);
        for (const id of [ok1, thrown, ok3]) await h.waitForJob(id, { timeoutMs: THREAD_START_MS });
        expect(h.job(ok1)).toMatchObject({ status: "COMPLETED", output: 2 });
        expect(h.job(thrown)).toMatchObject({ status: "FAILED" });
        expect(String(h.job(thrown)?.error)).toContain("boom");
        expect(h.job(ok3)).toMatchObject({ status: "COMPLETED", output: 6 });
        expect(h.job(waiting)?.status).toBe("CANCELLED");
        // Nothing was posted for the stopped job once it was stopped.
        expect(
          h
            .requests({ route: "job-done" })
            .filter((r) => r.path.includes(encodeURIComponent(waiting)) && !r.body.includes('"IN_PROGRESS"')),
        ).toEqual([]);
        // They ran as one batch: the jobs that ended on their own report one batch, of four.
        await waitFor("the three jobs' ends", () => batches.size === 3);
        expect(new Set([...batches.values()].map((b) => b?.id)).size).toBe(1);
        expect([...batches.values()][0]).toMatchObject({ id: expect.any(String), size: 4 });
      },
      kind.thread ? THREAD_TEST_MS : 30_000,
    );
  },
);
