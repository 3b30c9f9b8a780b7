import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler, defineHandler, type HandlerDefinition } from "../../src/index.js";
import { COMMON, contractInput, work } from "../fixtures/contract-handlers.js";
import { signalCensus } from "../signal-census.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../thread-allowance.js";
import { testHarness, turn, waitFor, workerFor } from "./helpers.js";

/**
 * The contract every runner keeps (docs/architecture.md, "A run of N ≥ 1 jobs"): the same cases
 * for the in-process runner and isolation threads, with a plain handler and a batch handler —
 * output, a throw, an output JSON cannot carry, the deadline, a job-stop, and a handler that
 * ignores its signal (hard stop), and signal leaks (nothing kept per job on a signal that
 * outlives it). Workers run against the harness over loopback; deadlines and
 * graces run on a ManualClock.
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
      await using h = await testHarness();
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
      await using h = await testHarness();
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
      await using h = await testHarness();
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
      await using h = await testHarness();
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
