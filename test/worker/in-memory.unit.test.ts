import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Harness, ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler, defineHandler } from "../../src/index.js";
import { PLATFORM_ENV } from "../../src/protocol/index.js";
import { inMemoryHarness } from "../support/inject.js";
import { gate, logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

// A worker against the harness in memory (the worker's `connect` option, Harness.connect): the
// platform's routes as a loopback harness serves them, with no socket on either side. This file is
// in the unit lane, whose guard (test/support/unit-guard.ts) makes every listen and connect throw:
// each test here passing is the proof that the worker opened none.

describe("a worker connected to the harness in memory", () => {
  it("takes, runs and reports jobs: outputs, a handler's error, progress and a stream", async () => {
    await using h = memoryHarness();
    const env = h.workerEnv("local");
    expect(env[PLATFORM_ENV.pingUrl]).toBeUndefined();
    expect(env[PLATFORM_ENV.jobTakeUrl]).toMatch(/^http:\/\/localhost\/v2\/local\/job-take\//);
    const sink = logSink();
    await using w = await workerFor(
      h,
      defineHandler({
        input: z.object({ n: z.number(), kind: z.enum(["plain", "fail", "stream"]) }),
        concurrency: 2,
        returnAggregateStream: true,
        async *handler({ input, progress }) {
          if (input.kind === "fail") throw new Error(`no ${input.n}`);
          progress({ at: input.n });
          if (input.kind === "stream") {
            for (let i = 0; i < 3; i++) yield { piece: i };
            return;
          }
          yield { twice: input.n * 2 };
        },
      }),
      { sink },
    );
    const plain = h.enqueue("local", { input: { n: 2, kind: "plain" } });
    const failed = h.enqueue("local", { input: { n: 3, kind: "fail" } });
    const streamed = h.enqueue("local", { input: { n: 4, kind: "stream" } });
    const [a, b, c] = await Promise.all([plain, failed, streamed].map((id) => h.waitForJob(id)));
    expect([a!.status, a!.output, a!.error]).toEqual(["COMPLETED", [{ twice: 4 }], undefined]);
    expect(b!.status).toBe("FAILED");
    expect(JSON.stringify(b!.error)).toContain("no 3");
    expect(c!.status).toBe("COMPLETED");
    expect(c!.output).toEqual([{ piece: 0 }, { piece: 1 }, { piece: 2 }]);
    expect(c!.stream.map((chunk) => chunk.output)).toEqual([{ piece: 0 }, { piece: 1 }, { piece: 2 }]);
    // Every worker route went through the harness's own router, as over loopback.
    const routes = new Set(h.requests().map((r) => r.route));
    expect(routes).toContain("job-done");
    expect(routes).toContain("job-stream");
    const progress = h
      .requests({ route: "job-done" })
      .filter((r) => r.path.endsWith(`/${plain}`) && r.body.includes('"IN_PROGRESS"'));
    expect(progress.map((r) => JSON.parse(r.body) as unknown)).toEqual([
      { status: "IN_PROGRESS", output: { at: 2 } },
    ]);
    // Without a ping URL the worker runs no heartbeat thread, and says nothing of it as a fault.
    expect(h.requests({ route: "ping" })).toEqual([]);
    expect(sink.lines.filter((l) => l["level"] === "error" || l["level"] === 50)).toEqual([]);
    expect(w.concurrency).toBe(2);
  });

  it("runs a batch handler's jobs as one call", async () => {
    await using h = memoryHarness();
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    await using _b = await workerFor(
      h,
      defineBatchHandler({
        input: z.object({ n: z.number() }),
        batch: { maxSize: 3, maxWaitMs: 60_000 },
        handler: ({ inputs }) => inputs.map((i) => i.n * 10),
      }),
      { clock: new ManualClock() },
    );
    const outputs = (await Promise.all(ids.map((id) => h.waitForJob(id)))).map((j) => j.output);
    expect(outputs).toEqual([10, 20, 30]);
  });

  it("aborts a running job the harness cancels, through the in-memory job-stop poll", async () => {
    await using h = memoryHarness();
    const started = gate();
    await using _w = await workerFor(
      h,
      defineHandler({
        input: z.unknown(),
        handler: async ({ signal }) => {
          started.open();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
          return "aborted";
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    await started.promise;
    h.stopJob(id);
    const job = await h.waitForJob(id);
    expect(job.status).toBe("CANCELLED");
    await waitFor("the job-stop poll to have named the job", () =>
      h.requests({ route: "job-stop" }).some((r) => r.status === 200),
    );
  });

  it("refuses exitOnHardStop, whose watchdog would post from the heartbeat thread over a socket", async () => {
    // The watchdog of an in-process worker that may exit runs in the heartbeat thread and posts a
    // stuck job's failure over sockets of its own: in memory that post reaches nothing (or
    // whatever listens on localhost:80), and the docs say a worker in memory has no watchdog.
    await using h = memoryHarness();
    const sink = logSink();
    await expect(
      workerFor(h, defineHandler({ input: z.unknown(), handler: () => "ok" }), {
        exitOnHardStop: true,
        sink,
      }),
    ).rejects.toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message: expect.stringContaining("connect cannot be combined with exitOnHardStop"),
    });
    // Without it the same worker starts in memory, and runs no heartbeat thread.
    await using w = await workerFor(h, defineHandler({ input: z.unknown(), handler: () => "ok" }), { sink });
    expect(w.parts).not.toContain("heartbeat");
  });

  it("closes: a take held in memory is cut, and the harness reads the hang-up at once", async () => {
    const h = memoryHarness(60_000);
    try {
      const w = await workerFor(h, defineHandler({ input: z.unknown(), handler: () => "ok" }), {
        takeTimeoutMs: 60_000,
      });
      await waitFor("a take to be held", () => h.requests({ route: "job-take" }).length > 0);
      await w.close();
      // The worker's connection is gone: a job queued now is not handed to a take nobody reads.
      const id = h.enqueue("local", { input: {} });
      expect(h.job(id)?.status).toBe("IN_QUEUE");
    } finally {
      await h.close();
    }
  });

  it("keeps a worker that never pings alive by its requests, and lapses it once it goes silent", async () => {
    // The harness's heartbeat timeout (10 s) runs on its clock: 24 s pass on it while the job
    // runs. On loopback a worker without pings would lapse then and its job be requeued; in memory
    // its job-stop polls keep it alive.
    const clock = new ManualClock();
    await using h = inMemoryHarness({ takeTimeoutMs: 100, heartbeatTimeoutMs: 10_000, clock });
    const done = gate();
    const started = gate();
    const w = await workerFor(
      h,
      defineHandler({
        input: z.unknown(),
        handler: async () => {
          started.open();
          await done.promise;
          return "long";
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    await started.promise;
    for (let step = 0; step < 4; step++) {
      clock.advance(6_000);
      const polls = h.requests({ route: "job-stop" }).length;
      // A request of the worker's own after each step re-arms its lapse.
      await waitFor("the next job-stop poll", () => h.requests({ route: "job-stop" }).length > polls);
    }
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    done.open();
    const job = await h.waitForJob(id, { timeoutMs: 10_000 });
    expect([job.status, job.output, job.error]).toEqual(["COMPLETED", "long", undefined]);
    expect(h.workers("local")).toHaveLength(1);
    await w.close();
    // Silent now: gone after the heartbeat timeout, as a worker that stops pinging is.
    clock.advance(11_000);
    expect(h.workers("local")).toEqual([]);
  });
});

describe("a harness in memory", () => {
  it("starts no workers (spawn, managementSpawn and a load-balancing fleet are refused, naming why) and refuses a misspelt change", async () => {
    const spawn = () => Promise.reject(new Error("never called"));
    expect(() => Harness.inMemory({ managementSpawn: spawn })).toThrow(/starts no workers/);
    expect(() => Harness.inMemory({ endpoints: [{ id: "a", spawn }] })).toThrow(/starts no workers/);
    await using h = memoryHarness();
    expect(() => h.addEndpoint({ id: "b", spawn })).toThrow(/^addEndpoint: Harness\.inMemory binds no port/);
    expect(() =>
      h.addLoadBalancer({ id: "c", fleet: { spawn, minWorkers: 0, maxWorkers: 1, concurrency: 1 } }),
    ).toThrow(/^addLoadBalancer: Harness\.inMemory binds no port/);
    expect(h.endpointIds()).toEqual(["local"]);
    // A change with a misspelt field is refused, not applied as "no change".
    expect(() => h.updateEndpoint("local", { timeoutMs: 5 } as never)).toThrow(/timeoutMs/);
    h.updateEndpoint("local", { executionTimeoutMs: 5_000 });
  });

  it("refuses connect for a load-balancing worker, which has no platform requests", async () => {
    await using h = memoryHarness();
    await expect(
      workerFor(h, defineHandler({ input: z.unknown(), handler: () => "x" }), { mode: "lb" }),
    ).rejects.toThrow(/connect is for a queue worker's platform requests/);
  });
});
