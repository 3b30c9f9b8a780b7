import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import type { BatchInfo, ExecuteOutcome } from "../../src/handler/execute.js";
import { parseInput } from "../../src/handler/parse-input.js";
import { defineBatchHandler, type HandlerDefinition } from "../../src/index.js";
import type { DeliveredJob } from "../../src/protocol/index.js";
import type { BatchRun, BatchRunMember } from "../../src/worker/runner/batch-runner.js";
import { InProcessRunner, type Runner, type RunnerSettings } from "../../src/worker/runner/runner.js";
import { defaultThreadEntryUrl, ThreadRunner } from "../../src/worker/runner/thread-runner.js";
import { MANY_BATCH, MANY_TIMEOUT_MS } from "../fixtures/contract-batch-many.js";
import { COMMON, contractInput, workEach } from "../fixtures/contract-handlers.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../thread-allowance.js";
import { testHarness, waitFor, workerFor } from "./helpers.js";

/**
 * The runner contract with real batches (docs/architecture.md, "A run of N ≥ 1 jobs"): several
 * jobs in one batch, one failing and two aborted one at a time, run through the Runner interface
 * itself (runBatch, abortJob) for the in-process runner and isolation threads. Each job's output,
 * failure and abort reason must land on that job alone: an abort or an outcome that reaches
 * another job of the batch, or the wrong index, shows here. Then one loopback run per runner
 * kind: a worker takes the jobs as one batch from the harness, and a job-stop ends one of them.
 */

const MANY_MODULE = fileURLToPath(new URL("../fixtures/contract-batch-many.ts", import.meta.url));
const log = pino({ level: "silent" });
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

interface Kind {
  readonly name: string;
  readonly thread: boolean;
  definition(): Promise<HandlerDefinition>;
  runner(definition: HandlerDefinition): Runner;
}

const KINDS: readonly Kind[] = [
  {
    name: "in-process",
    thread: false,
    definition: async () => inProcessMany,
    runner: (definition) => new InProcessRunner(definition, settings, log, new ManualClock()),
  },
  {
    name: "isolation thread",
    thread: true,
    definition: async () => (await import("../fixtures/contract-batch-many.js")).default,
    runner: () =>
      new ThreadRunner({
        entryUrl: defaultThreadEntryUrl(),
        handlerModule: MANY_MODULE,
        log: { platform: false, level: "silent", secrets: [] },
        settings,
        logger: log,
        onUnfit: (check, reason) => {
          throw new Error(`the isolation thread is unfit (${check}): ${reason}`);
        },
        clock: new ManualClock(),
        setup: { present: false, timeoutMs: 60_000 },
      }),
  },
];

/** The batch every case runs: an output, a throw, two jobs that wait for their own signal, an output. */
const INPUTS = [
  { n: 1 },
  { mode: "throw" },
  { mode: "wait", n: 2 },
  { mode: "wait", n: 3 },
  { n: 3 },
] as const;

/** What a job's outcome says, in short: its output's JSON or its error. */
function resultOf(outcome: ExecuteOutcome): string {
  return outcome.result.kind === "output"
    ? `output ${outcome.result.json}`
    : `error ${outcome.result.message}`;
}

const open: Runner[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

describe.each(KINDS)("runner contract with real batches: $name", (kind) => {
  const allowance = kind.thread ? THREAD_TEST_MS : 30_000;

  it(
    "gives each job of one batch its own outcome, and aborts only the job named",
    async () => {
      const definition = await kind.definition();
      const runner = kind.runner(definition);
      open.push(runner);
      expect(
        await runner.start({ closing: new AbortController().signal, progress: () => undefined }),
      ).toEqual({
        ok: true,
        state: undefined,
      });
      const progressed: number[] = [];
      const members: BatchRunMember[] = await Promise.all(
        INPUTS.map(async (input, index) => ({
          job: { id: `job-${index}`, input } as DeliveredJob,
          parsed: await parseInput(definition.input, input),
          timeoutMs: MANY_TIMEOUT_MS,
          log,
          progress: () => progressed.push(index),
        })),
      );
      const run: BatchRun = runner.runBatch({ batchId: "batch-1", members, log });
      // Both waiting jobs are in the handler (each posted its progress).
      await waitFor("the two waiting jobs' progress", () => progressed.length === 2, THREAD_START_MS);
      expect(progressed.sort()).toEqual([2, 3]);
      // One at a time, in order: had job 2's abort reached job 3 (or another index), job 3 would
      // end with job 2's reason before its own abort is sent.
      run.abortJob(2, new Error("job 2 stopped"));
      run.abortJob(3, new Error("job 3 stopped"));
      const outcomes = await run.outcomes;
      if (outcomes === "killed") throw new Error("the batch was killed");
      expect(outcomes.map(resultOf)).toEqual([
        "output 2",
        "error boom",
        "error job 2 stopped",
        "error job 3 stopped",
        "output 6",
      ]);
      // A late abort of an ended batch does nothing (no throw, no signal fired).
      run.abortJob(0, new Error("too late"));
      run.abortBatch(new Error("too late"));
    },
    allowance,
  );

  it(
    "runs a batch taken from the harness over loopback, one job of it stopped by a job-stop",
    async () => {
      await using h = await testHarness();
      const ids = INPUTS.filter((input) => !("mode" in input && input.mode === "wait" && input.n === 3)).map(
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
    allowance,
  );
});
