import { describe, expect, it } from "vitest";
import type { RunletError } from "../../src/errors.js";
import { ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler, JobError } from "../../src/index.js";
import { inMemoryHarness, sendDashboard } from "../support/inject.js";
import { gate, memoryHarness, testHarness, turn, waitFor, workerFor } from "../support/workers.js";
import { batchOf, numbers } from "./batch-helpers.js";

/**
 * Dynamic batching against the harness over real HTTP (docs/handler.md, "Batching"). The window and
 * every deadline run on a ManualClock, so nothing here depends on how fast the machine is.
 */

describe("batch handlers", () => {
  it("runs queued jobs as one call, one output each in order, and names the batch on each job-done", async () => {
    await using h = memoryHarness();
    const calls: number[][] = [];
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 3, maxWaitMs: 60_000 },
        handler: ({ inputs }) => {
          calls.push(inputs.map((i) => i.n));
          return inputs.map((i) => ({ twice: i.n * 2 }));
        },
      }),
      { clock: new ManualClock() },
    );
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(calls).toEqual([[1, 2, 3]]);
    expect(jobs.map((j) => [j.status, j.output])).toEqual([
      ["COMPLETED", { twice: 2 }],
      ["COMPLETED", { twice: 4 }],
      ["COMPLETED", { twice: 6 }],
    ]);
    const batches = ids.map((id) => batchOf(h, id));
    expect(new Set(batches.map((b) => b.id)).size).toBe(1);
    expect(batches.map((b) => [b.size, b.waitMs])).toEqual([
      ["3", "0"],
      ["3", "0"],
      ["3", "0"],
    ]);
  });

  it("shows on the dashboard's job view which batch a job ran in: id, size and wait", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 300, dashboard: true });
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({ input: numbers, batch: { maxSize: 2 }, handler: ({ inputs }) => inputs }),
      { clock: new ManualClock() },
    );
    await Promise.all(ids.map((id) => h.waitForJob(id)));
    const auth = { authorization: `Bearer ${h.apiKey}` };
    const detail = (await (await sendDashboard(h, `api/jobs/${ids[1]}`, { headers: auth })).json()) as {
      batch?: unknown;
    };
    expect(detail.batch).toEqual({ id: batchOf(h, ids[1]!).id, size: 2, waitMs: 0 });
  });

  it("holds a lone job for maxWaitMs, then runs it as a batch of one", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    const calls: number[][] = [];
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 8, maxWaitMs: 1_000 },
        handler: ({ inputs }) => {
          calls.push(inputs.map((i) => i.n));
          return inputs.map((i) => i.n);
        },
      }),
      { clock },
    );
    const id = h.enqueue("local", { input: { n: 7 } });
    await waitFor("the job to be taken", () => h.job(id)?.status === "IN_PROGRESS");
    await turn();
    clock.advance(999);
    await turn();
    expect(calls).toEqual([]);
    clock.advance(1);
    const job = await h.waitForJob(id);
    expect([job.status, job.output, calls]).toEqual(["COMPLETED", 7, [[7]]]);
    expect(batchOf(h, id)).toMatchObject({ size: "1", waitMs: "1000" });
  });

  it("fails a bad input alone, and the seat it would have taken goes to the next job", async () => {
    await using h = memoryHarness();
    const calls: number[][] = [];
    const bad = h.enqueue("local", { input: { n: "one" } });
    const good = [h.enqueue("local", { input: { n: 1 } }), h.enqueue("local", { input: { n: 2 } })];
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: ({ inputs }) => {
          calls.push(inputs.map((i) => i.n));
          return inputs.map((i) => i.n);
        },
      }),
      // The window never closes on its own: the batch runs only because it fills.
      { clock: new ManualClock() },
    );
    const failed = await h.waitForJob(bad);
    expect(failed.status).toBe("FAILED");
    expect(failed.error).toMatch(
      /^input is invalid:\n✖ Invalid input: expected number, received string\n {2}→ at n/,
    );
    const done = await Promise.all(good.map((id) => h.waitForJob(id)));
    expect(done.map((j) => j.output)).toEqual([1, 2]);
    expect(calls).toEqual([[1, 2]]);
  });

  it("fails only the job whose place holds a JobError (or a returned { error })", async () => {
    await using h = memoryHarness();
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 3, maxWaitMs: 60_000 },
        handler: ({ inputs }) =>
          inputs.map((i) =>
            i.n === 2 ? new JobError("two is not allowed") : i.n === 3 ? { error: "three neither" } : i.n,
          ),
      }),
      { clock: new ManualClock() },
    );
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => [j.status, j.output ?? j.error])).toEqual([
      ["COMPLETED", 1],
      ["FAILED", "two is not allowed"],
      ["FAILED", "three neither"],
    ]);
  });

  it("fails every job of the batch with the reason when the handler throws", async () => {
    await using h = memoryHarness();
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: () => {
          throw new RangeError("the device fell over");
        },
      }),
      { clock: new ManualClock() },
    );
    for (const job of await Promise.all(ids.map((id) => h.waitForJob(id)))) {
      expect(job.status).toBe("FAILED");
      expect(JSON.parse(job.error!)).toMatchObject({
        error_type: "RangeError",
        error_message: "the device fell over",
      });
    }
  });

  it("fails every job with a clear message when the handler returns the wrong number of outputs", async () => {
    await using h = memoryHarness();
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({ input: numbers, batch: { maxSize: 2, maxWaitMs: 60_000 }, handler: () => [1] }),
      { clock: new ManualClock() },
    );
    for (const job of await Promise.all(ids.map((id) => h.waitForJob(id)))) {
      expect(job.error).toBe(
        "the batch handler returned 1 outputs for 2 jobs; return exactly one per job, in order (a JobError in a job's place fails that job only)",
      );
    }
  });

  it("times a job out at its own deadline while the rest of its batch runs on", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    const release = gate();
    const seen: { short?: unknown; long?: boolean; batch?: boolean } = {};
    let started = false;
    const short = h.enqueue("local", { input: { n: 1 }, policy: { executionTimeout: 10_000 } });
    const long = h.enqueue("local", { input: { n: 2 }, policy: { executionTimeout: 600_000 } });
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: async ({ inputs, jobs, signal }) => {
          started = true;
          jobs[0]!.signal.addEventListener("abort", () => {
            seen.short = jobs[0]!.signal.reason;
          });
          await release.promise;
          seen.long = jobs[1]!.signal.aborted;
          seen.batch = signal.aborted;
          return inputs.map((i) => i.n * 10);
        },
      }),
      { clock },
    );
    await waitFor("the batch to start", () => started);
    await turn();
    clock.advance(10_000);
    const timedOut = await h.waitForJob(short);
    expect(timedOut.status).toBe("FAILED");
    expect(timedOut.error).toBe("job timed out after 10000 ms (executionTimeout)");
    expect((seen.short as RunletError).code).toBe("RUNLET_JOB_TIMEOUT");
    expect(h.job(long)!.status).toBe("IN_PROGRESS");
    release.open();
    const completed = await h.waitForJob(long);
    expect([completed.status, completed.output]).toEqual(["COMPLETED", 20]);
    expect(seen).toMatchObject({ long: false, batch: false });
    // The timed-out job's late place in the outputs was never posted.
    expect(h.job(short)!.duplicateResults).toBe(0);
    expect(h.requests({ route: "job-done" }).filter((r) => r.path.endsWith(`/${short}`))).toHaveLength(1);
  });

  it("stops one job on job-stop (its own signal), and fires the batch's signal once no job is wanted", async () => {
    await using h = memoryHarness();
    const release = gate();
    const reasons: unknown[] = [];
    let batchSignal: AbortSignal | undefined;
    const clock = new ManualClock();
    const a = h.enqueue("local", { input: { n: 1 } });
    const b = h.enqueue("local", { input: { n: 2 } });
    const c = h.enqueue("local", { input: { n: 3 } });
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 3, maxWaitMs: 60_000 },
        handler: async ({ inputs, jobs, signal }) => {
          batchSignal = signal;
          for (const job of jobs)
            job.signal.addEventListener("abort", () => reasons.push([job.id, job.signal.reason.code]));
          await release.promise;
          return inputs.map((i) => i.n);
        },
      }),
      { clock },
    );
    const w = _w;
    await waitFor("the batch to start", () => batchSignal !== undefined);
    h.stopJob(a);
    await waitFor("job a's signal", () => reasons.length === 1);
    expect(reasons).toEqual([[a, "RUNLET_JOB_STOPPED"]]);
    expect(batchSignal!.aborted).toBe(false);
    h.stopJob(b);
    h.stopJob(c);
    await waitFor("the batch's signal", () => batchSignal!.aborted);
    expect((batchSignal!.reason as RunletError).code).toBe("RUNLET_JOB_STOPPED");
    release.open();
    // The worker serves on; nothing was ever posted for the stopped jobs.
    const next = h.enqueue("local", { input: { n: 4 } });
    expect([a, b, c].map((id) => h.job(id)!.status)).toEqual(["CANCELLED", "CANCELLED", "CANCELLED"]);
    await waitFor("the next job to be taken", () => h.job(next)?.status === "IN_PROGRESS");
    expect(h.requests({ route: "job-done" })).toEqual([]);
    // The shutdown grace runs on the worker's clock: the job still in its window is let go
    // once the clock passes it.
    let closed = false;
    void w.close().then(() => {
      closed = true;
    });
    await waitFor("the worker to close", () => {
      clock.advance(1_000);
      return closed;
    });
  });

  it("posts each job's progress to that job", async () => {
    await using h = memoryHarness();
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: ({ inputs, jobs }) => {
          for (const [at, job] of jobs.entries()) job.progress({ step: inputs[at]!.n });
          return inputs.map(() => "done");
        },
      }),
      { clock: new ManualClock() },
    );
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => j.progress)).toEqual([[{ step: 1 }], [{ step: 2 }]]);
  });

  it("fits each job's output on its own: one too large fails alone (no store), the others post", async () => {
    await using h = memoryHarness();
    const ids = [10, 5_000].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: ({ inputs }) => inputs.map((i) => "x".repeat(i.n)),
      }),
      { clock: new ManualClock(), maxResultBytes: 1_000 },
    );
    const [small, large] = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect([small!.status, small!.output]).toEqual(["COMPLETED", "x".repeat(10)]);
    expect(large!.status).toBe("FAILED");
    expect(large!.error).toMatch(
      /^the output is 5002 bytes, over the 1000-byte limit for a result, and no S3 store/,
    );
  });

  it("lists every job of every batch in the heartbeat: the running batch and the one filling behind it", async () => {
    await using h = await testHarness();
    const release = gate();
    let running = 0;
    const ids = [1, 2, 3, 4].map((n) => h.enqueue("local", { input: { n } }));
    await using _w = await workerFor(
      h,
      defineBatchHandler({
        input: numbers,
        batch: { maxSize: 2, maxWaitMs: 60_000 },
        handler: async ({ inputs }) => {
          running += 1;
          await release.promise;
          return inputs.map((i) => i.n);
        },
      }),
      { clock: new ManualClock(), podId: "pod-batch", pingIntervalMs: 50 },
    );
    const listed = await waitFor("a ping naming all four jobs", () =>
      h
        .requests({ route: "ping" })
        .map((r) => r.query["job_id"]?.split(",").sort() ?? [])
        .find((list) => list.length === 4),
    );
    expect(listed).toEqual([...ids].sort());
    expect(running).toBe(1);
    release.open();
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => j.output)).toEqual([1, 2, 3, 4]);
    expect(running).toBe(2);
  });

  it("refuses a generator batch handler when it is defined, saying streaming from a batch is not supported", () => {
    expect(() =>
      defineBatchHandler({
        async *handler() {
          yield [];
        },
      } as never),
    ).toThrow(
      "defineBatchHandler: a batch handler cannot be a generator: streaming from a batch is not supported (return one output per job; use defineHandler to stream)",
    );
  });

  it("checks batch options with the limits in the message", () => {
    expect(() => defineBatchHandler({ batch: { maxSize: 0 }, handler: () => [] })).toThrow(
      /defineBatchHandler: batch\.maxSize must be an integer/,
    );
    expect(() => defineBatchHandler({ batch: { maxWaitMs: -1 }, handler: () => [] })).toThrow(
      /defineBatchHandler: batch\.maxWaitMs must be an integer/,
    );
  });
});
