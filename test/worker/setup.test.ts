import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { defineBatchHandler, defineHandler, type Worker, type WorkerEvents } from "../../src/index.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { gate, logSink, memoryHarness, testHarness, turn, waitFor, workerFor } from "../support/workers.js";

/**
 * `setup` and `teardown` (docs/handler.md, "Loading a model: setup and teardown"): setup runs where
 * the handler runs, before the worker is offered a job; a failed setup takes no job, pings
 * unhealthy with check=setup and stops with exit code 1; teardown runs after the running jobs,
 * within the grace. Workers run against the harness in memory, or over loopback where a test reads
 * pings (the heartbeat thread pings over sockets of its own); time that matters is a ManualClock's.
 */

const setupThreadFixture = fileURLToPath(new URL("../fixtures/setup-thread.ts", import.meta.url));

function unhealthyPings(h: Harness) {
  return h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
}

/** Every event of `names` the worker emits, in order. */
function record(w: Worker, names: readonly (keyof WorkerEvents)[]): Array<[string, unknown]> {
  const seen: Array<[string, unknown]> = [];
  for (const name of names) w.on(name, (event) => seen.push([name, event]));
  return seen;
}

const savedEnv = { ...process.env };
afterEach(() => {
  for (const key of ["RUNLET_TEST_SETUP", "RUNLET_TEST_SETUP_MS", "RUNLET_TEST_TEARDOWN_FILE"]) {
    if (savedEnv[key] === undefined) delete process.env[key];
    else process.env[key] = savedEnv[key];
  }
});

describe("setup in-process", () => {
  it("takes no job before setup resolves, then runs jobs with its state; reports phases and ready", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const loaded = gate();
    let setupCalls = 0;
    let takesWhenSetupEnded = -1;
    const w = await workerFor(
      h,
      defineHandler({
        async setup({ progress }) {
          setupCalls += 1;
          progress("weights 40 %");
          await loaded.promise;
          takesWhenSetupEnded = h.requests({ route: "job-take" }).length;
          return { model: "tiny", loads: setupCalls };
        },
        handler: ({ state }) => ({ model: state.model, loads: state.loads }),
      }),
      { sink },
    );
    const events = record(w, ["phase", "setupProgress", "ready", "taken"]);
    const id = h.enqueue("local", { input: {} });
    await waitFor("setup to report progress", () => sink.lines.some((l) => l["setupProgress"] !== undefined));
    loaded.open();
    expect((await h.waitForJob(id)).output).toEqual({ model: "tiny", loads: 1 });
    await w.close();
    expect(setupCalls).toBe(1);
    expect(takesWhenSetupEnded).toBe(0);
    // The worker waits one turn before its phases, so a listener added as startWorker resolves
    // sees setup's start, its progress, its end, ready and the take, in this order.
    const names = events.map(([name, event]) =>
      name === "phase" ? `phase:${(event as { state: string }).state}` : name,
    );
    expect(names).toEqual(["phase:started", "setupProgress", "phase:done", "ready", "taken"]);
    const ready = events.find(([name]) => name === "ready")![1] as WorkerEvents["ready"];
    expect(Object.keys(ready.phases)).toEqual(["runlet", "setup", "total"]);
    expect(ready.phases["total"]).toBeGreaterThanOrEqual(ready.phases["setup"]!);
    const readyLine = sink.lines.find((l) => l["msg"] === "worker ready" || l["message"] === "worker ready");
    expect(readyLine?.["phases"]).toEqual(ready.phases);
    expect(sink.lines.find((l) => l["setupProgress"] !== undefined)?.["setupProgress"]).toBe("weights 40 %");
    expect(sink.lines.filter((l) => l["phase"] === "setup").map((l) => l["phaseState"])).toEqual([
      "started",
      "done",
    ]);
  });

  it("gives every concurrent slot the same state object, and a batch handler its state", async () => {
    await using h = memoryHarness();
    const hold = gate();
    const states = new Set<unknown>();
    let made: unknown;
    let running = 0;
    await using _w = await workerFor(
      h,
      defineHandler({
        concurrency: 3,
        setup: () => {
          made = { shared: true };
          return made as { shared: boolean };
        },
        handler: async ({ state }) => {
          states.add(state);
          running += 1;
          await hold.promise;
          return state.shared;
        },
      }),
    );
    const ids = [1, 2, 3].map(() => h.enqueue("local", { input: {} }));
    await waitFor("three jobs to run at once", () => running === 3);
    hold.open();
    for (const job of await Promise.all(ids.map((id) => h.waitForJob(id)))) expect(job.output).toBe(true);
    expect([...states]).toEqual([made]);

    await using h2 = memoryHarness();
    await using _b = await workerFor(
      h2,
      defineBatchHandler({
        batch: { maxSize: 2, maxWaitMs: 0 },
        setup: () => ({ prefix: "v:" }),
        handler: ({ inputs, state }) => inputs.map((input) => `${state.prefix}${String(input)}`),
      }),
    );
    expect((await h2.waitForJob(h2.enqueue("local", { input: 7 }))).output).toBe("v:7");
  });

  it("pings unhealthy with check=setup and the reason, takes no job and stops with exit code 1 when setup throws", async () => {
    await using h = await testHarness();
    const sink = logSink();
    h.enqueue("local", { input: {} });
    const w = await workerFor(
      h,
      defineHandler({
        setup: () => {
          throw new Error("weights not found");
        },
        handler: () => "never",
      }),
      { podId: "pod-setup", sink },
    );
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const [ping, ...more] = unhealthyPings(h);
    expect(more).toEqual([]);
    expect(ping!.query["check"]).toBe("setup");
    expect(ping!.query["reason"]).toBe("setup failed: Error: weights not found");
    expect(h.requests({ route: "job-take" })).toEqual([]);
    const line = sink.lines.find((l) => l["code"] === "RUNLET_WORKER_UNFIT");
    expect(line?.["reason"]).toBe("setup failed: Error: weights not found");
    expect(sink.lines.filter((l) => l["phase"] === "setup").map((l) => l["phaseState"])).toEqual([
      "started",
      "failed",
    ]);
  });

  it("fails setup at setupTimeoutMs on the worker's clock: its signal fires, unhealthy ping, no take, exit 1", async () => {
    await using h = await testHarness();
    const clock = new ManualClock();
    let signal: AbortSignal | undefined;
    h.enqueue("local", { input: {} });
    const w = await workerFor(
      h,
      defineHandler({
        setupTimeoutMs: 5_000,
        setup: (ctx) => {
          signal = ctx.signal;
          return new Promise<never>(() => undefined);
        },
        handler: () => "never",
      }),
      { podId: "pod-slow", clock },
    );
    await waitFor("setup to start", () => signal !== undefined);
    clock.advance(4_999);
    await turn();
    expect(signal!.aborted).toBe(false);
    clock.advance(1);
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    expect(signal!.aborted).toBe(true);
    expect(unhealthyPings(h).map((p) => [p.query["check"], p.query["reason"]])).toEqual([
      ["setup", "setup did not finish within 5000 ms (setupTimeoutMs)"],
    ]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  });

  it("sends no heartbeat ping while setup runs (as the Python SDK with a model loaded at import), then pings", async () => {
    await using h = await testHarness();
    const loaded = gate();
    let setupRan = false;
    const w = await workerFor(
      h,
      defineHandler({
        setup: async () => {
          setupRan = true;
          await loaded.promise;
          return 1;
        },
        handler: () => "ok",
      }),
      { podId: "pod-loading", pingIntervalMs: 50 },
    );
    // A worker without setup beside it: its pings prove that ping intervals have passed.
    await using _other = await workerFor(h, defineHandler({ handler: () => "ok" }), {
      podId: "pod-other",
      pingIntervalMs: 50,
    });
    const pingsOf = (pod: string) => h.requests({ route: "ping" }).filter((r) => r.path.endsWith(`/${pod}`));
    await waitFor(
      "setup to run and the other worker to ping 4 times",
      () => setupRan && pingsOf("pod-other").length >= 4,
    );
    expect(pingsOf("pod-loading")).toEqual([]);
    loaded.open();
    await waitFor("the set-up worker to ping", () => pingsOf("pod-loading").length > 0);
    await w.close();
  });

  it("runs teardown with setup's state after the running job ended, and within the grace", async () => {
    await using h = memoryHarness();
    const order: string[] = [];
    const hold = gate();
    const state = { model: "m" };
    const w = await workerFor(
      h,
      defineHandler({
        setup: () => state,
        teardown: (got) => {
          order.push(got === state ? "teardown(state)" : "teardown(other)");
        },
        handler: async () => {
          order.push("job started");
          await hold.promise;
          order.push("job ended");
          return "done";
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    await waitFor("the job to start", () => order.includes("job started"));
    const closed = w.close();
    await turn();
    expect(order).toEqual(["job started"]);
    hold.open();
    await closed;
    expect(order).toEqual(["job started", "job ended", "teardown(state)"]);
    expect((await h.waitForJob(id)).output).toBe("done");
  });

  it("gives up on a teardown that outlasts the grace, on the worker's clock", async () => {
    await using h = memoryHarness();
    const clock = new ManualClock();
    const sink = logSink();
    let tornDown = false;
    const w = await workerFor(
      h,
      defineHandler({
        setup: () => 1,
        teardown: () => {
          tornDown = true;
          return new Promise(() => undefined);
        },
        handler: () => "ok",
      }),
      { clock, sink, shutdownGraceMs: 3_000 },
    );
    await waitFor("the worker to be ready", () => sink.lines.some((l) => l["phases"] !== undefined));
    const closed = w.close();
    await waitFor("teardown to start", () => tornDown);
    clock.advance(3_000);
    await closed;
    expect(
      sink.lines.some((l) => String(l["msg"] ?? l["message"]).startsWith("teardown did not finish")),
    ).toBe(true);
  });
});

describe("setup under isolation: thread", () => {
  it(
    "runs setup in each thread before it is offered a job, outside the job's time, and again after a hard stop",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "runlet-setup-"));
      try {
        process.env["RUNLET_TEST_SETUP_MS"] = "200";
        process.env["RUNLET_TEST_TEARDOWN_FILE"] = join(dir, "teardown");
        await using h = memoryHarness();
        const clock = new ManualClock();
        const sink = logSink();
        const { default: definition } = await import("../fixtures/setup-thread.js");
        const w = await workerFor(h, definition, { clock, sink, handlerModule: setupThreadFixture });
        const first = await h.waitForJob(h.enqueue("local", { input: {} }), { timeoutMs: THREAD_START_MS });
        const a = first.output as {
          threadId: number;
          setups: number;
          loadedAt: number;
          handlerStartedAt: number;
        };
        expect(a.setups).toBe(1);
        // The job's time (its deadline less its timeout) began after its thread's setup ended.
        expect(a.handlerStartedAt).toBeGreaterThanOrEqual(a.loadedAt);
        const readyLine = sink.lines.find((l) => l["phases"] !== undefined);
        expect(readyLine?.["phases"]).toHaveProperty("setup");
        // A job that spins is hard-stopped; the replacement thread sets up again before its first job.
        const spin = h.enqueue("local", { input: { mode: "spin" } });
        await waitFor(
          "the spinning job to report progress",
          () => h.job(spin)?.progress.length === 1,
          20_000,
        );
        await turn();
        clock.advance(10_000);
        await turn();
        clock.advance(1_000);
        expect((await h.waitForJob(spin, { timeoutMs: THREAD_START_MS })).error).toBe(
          "job timed out after 10000 ms (executionTimeout)",
        );
        const next = (await h.waitForJob(h.enqueue("local", { input: {} }), { timeoutMs: THREAD_START_MS }))
          .output as typeof a;
        expect(next.threadId).not.toBe(a.threadId);
        expect(next.setups).toBe(1);
        expect(next.loadedAt).toBeGreaterThan(a.loadedAt);
        expect(next.handlerStartedAt).toBeGreaterThanOrEqual(next.loadedAt);
        await w.close();
        // Teardown ran in the thread that served (the idle one), with its own state.
        expect((await readFile(join(dir, "teardown"), "utf8")).trim()).toBe(String(next.threadId));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    THREAD_TEST_MS,
  );

  it(
    "takes no job and stops unhealthy (check=setup) when a thread's setup throws",
    async () => {
      process.env["RUNLET_TEST_SETUP"] = "throw";
      await using h = await testHarness();
      h.enqueue("local", { input: {} });
      const { default: definition } = await import("../fixtures/setup-thread.js");
      const w = await workerFor(h, definition, {
        podId: "pod-thread-setup",
        handlerModule: setupThreadFixture,
      });
      expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
      expect(unhealthyPings(h).map((p) => [p.query["check"], p.query["reason"]])).toEqual([
        ["setup", "setup failed: Error: weights not found (in an isolation thread)"],
      ]);
      expect(h.requests({ route: "job-take" })).toEqual([]);
    },
    THREAD_TEST_MS,
  );
});
