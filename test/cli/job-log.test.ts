import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { followJobs } from "../../src/cli/job-log.js";
import { ManualClock, startHarness, type WorkerSpawner } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";

const steps = defineHandler({
  async *handler({ input, progress }) {
    const { n } = input as { n: number };
    progress({ n, step: "start" });
    yield `a${n}`;
    yield `b${n}`;
    if (n === 3) throw new Error("three is bad");
  },
});

const spawn: WorkerSpawner = async (env) => {
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const worker = await startWorker(steps, { env, logDestination: sink, takeTimeoutMs: 1_000 });
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
    const log = followJobs(h, (line) => lines.push(line));
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
        n === 3
          ? expect.stringMatching(
              /^job job-3 FAILED in 0 ms \(queued 0 ms\) error "\{\\"error_type\\":\\"Error\\",\\"error_message\\":\\"three is bad\\",.{10,}…$/,
            )
          : `job job-${n} COMPLETED in 0 ms (queued 0 ms) output []`,
      ]);
      expect(lines).toEqual(expected);
      expect(h.job("job-3")?.error).toMatch(/three is bad/);
    } finally {
      log.stop();
    }
    // Stopped: a later job prints nothing.
    await h.waitForJob(h.enqueue("local", { input: { n: 5 } }), { timeoutMs: 10_000 });
    expect(lines).toHaveLength(16);
  }, 30_000);
});
