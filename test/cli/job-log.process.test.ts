import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { followJobs } from "../../src/cli/job-log.js";
import { ManualClock, startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";

const steps = defineHandler({
  async *handler({ input, progress, metrics }) {
    const { n } = input as { n: number };
    metrics.set("n", n);
    progress({ n, step: "start" });
    yield `a${n}`;
    yield `b${n}`;
    if (n === 3) throw new Error("three is bad");
  },
});

/** Where the worker's JSON lines go: the job log under test, once it runs. */
let workerLines: (line: string) => void = () => {};

const spawn: WorkerSpawner = async (env) => {
  const sink = new Writable({
    write: (chunk, _e, cb) => {
      for (const line of String(chunk).split("\n")) if (line !== "") workerLines(line);
      cb();
    },
  });
  // Platform mode (JSON lines), as runlet dev runs its workers.
  const worker = await startWorker(steps, {
    env: { ...env, RUNPOD_ENDPOINT_ID: "local" },
    logDestination: sink,
    takeTimeoutMs: 1_000,
  });
  return { close: () => worker.close(), exited: worker.stopped };
};

describe("runlet dev's job log", () => {
  it("prints every job's progress, stream items and end even after the request record cap drops old records", async () => {
    // A frozen clock makes every timing 0 ms, so the lines are exact.
    await using h = await startHarness({
      clock: new ManualClock(),
      takeTimeoutMs: 1_000,
      maxRecordedRequests: 2,
      endpoints: [{ id: "local", spawn, minWorkers: 1 }],
    });
    await h.workersStarted("local");
    const lines: string[] = [];
    const metrics: unknown[] = [];
    const log = followJobs(
      {
        onJobEvent: (listener) => h.onJobEvent(listener),
        reportJobMetrics: (id, m) => metrics.push([id, m]),
      },
      (line) => lines.push(line),
    );
    workerLines = (line) => log.workerLine("[w] ", line);
    try {
      const ids: string[] = [];
      for (const n of [1, 2, 3, 4]) {
        const id = h.enqueue("local", { input: { n }, id: `job-${n}` });
        ids.push(id);
        await h.waitForJob(id, { timeoutMs: 10_000 });
      }
      // The cap held: far fewer records than requests were made.
      expect(h.requests().length).toBeLessThanOrEqual(2);
      const expected = [1, 2, 3, 4].flatMap((n) => [
        `job job-${n} progress {"n":${n},"step":"start"}`,
        `job job-${n} stream #1 "a${n}"`,
        `job job-${n} stream #2 "b${n}"`,
        // The worker's Finished. line comes just before the job's end, after its last stream item.
        expect.stringMatching(
          new RegExp(
            `^\\[w\\] (INFO |WARN ) Finished\\. job=job-${n} executionTimeMs=\\d+ metrics=\\{"n":${n}\\}`,
          ),
        ),
        n === 3
          ? // Read as runlet test prints it: type and message, code, then the stack on its own lines.
            expect.stringMatching(
              /^job job-3 FAILED in 0 ms \(queued 0 ms\): Error: three is bad \(RUNLET_JOB_HANDLER_THREW\)\nError: three is bad\n {4}at /,
            )
          : `job job-${n} COMPLETED in 0 ms (queued 0 ms) output []`,
      ]);
      expect(
        lines.filter((l) => !/^\[w\] INFO {2}(Started|worker)|^\[w\] .*(job-take|ping)/.test(l)),
      ).toEqual(expected);
      expect(metrics).toEqual([1, 2, 3, 4].map((n) => [`job-${n}`, { n }]));
      expect(h.job("job-3")?.error).toMatch(/three is bad/);
    } finally {
      log.stop();
    }
    // Stopped: a later job prints no job line.
    workerLines = () => {};
    await h.waitForJob(h.enqueue("local", { input: { n: 5 } }), { timeoutMs: 10_000 });
    expect(lines.filter((l) => l.startsWith("job "))).toHaveLength(16);
  }, 30_000);
});
