import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import {
  budgetLeftMs,
  configuredStartup,
  DEFAULT_INIT_TIMEOUT_S,
  readStartupBudget,
} from "../../src/worker/startup-budget.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

// issue 54, item 2: one start-up budget from the process's start (RUNPOD_INIT_TIMEOUT, else the
// platform's 7 minutes), each phase cut at what is left, a line at start when the configured
// timeouts exceed it, and an unfit worker with a reason naming the variable before the platform's
// limit. The worker runs in-process against the harness: over loopback where a test reads the
// unhealthy ping (the heartbeat thread pings over sockets of its own), else in memory.

/** A setup that never finishes by itself: it ends only when its signal fires. */
const endlessSetup = ({ signal }: { signal: AbortSignal }) =>
  new Promise<never>((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
  });

describe("the start-up budget", () => {
  it("ends a setup that outlasts a short RUNPOD_INIT_TIMEOUT, counted from the process's start, with a reason naming the variable before the budget ends", async () => {
    await using h = await testHarness();
    const sink = logSink();
    // The process started 18 s ago: of a 20 s budget, 2 s are left, less the margin (a twentieth,
    // 1 s): the setup is cut 1 s from now, 1 s before the platform's limit.
    const startedAt = Date.now() - 18_000;
    const w = await workerFor(
      h,
      defineHandler({ setup: endlessSetup, setupTimeoutMs: 30_000, handler: () => "never" }),
      {
        env: {
          ...h.workerEnv("local", { podId: "pod-budget" }),
          RUNPOD_ENDPOINT_ID: "local",
          RUNPOD_INIT_TIMEOUT: "20",
        },
        startedAt,
        sink,
      },
    );
    const ping = await waitFor("the unhealthy ping", () =>
      h.requests({ route: "ping" }).find((r) => r.query["status"] === "unhealthy"),
    );
    const at = Date.now();
    expect(at - startedAt).toBeLessThan(20_000);
    expect(ping.query["check"]).toBe("startup");
    expect(ping.query["reason"]).toMatch(
      /^start-up did not finish within RUNPOD_INIT_TIMEOUT \(20 s\): the setup phase was still running 19\.\d s after the process started, and the platform marks a worker unhealthy past that limit\. Raise RUNPOD_INIT_TIMEOUT on the endpoint \(seconds\), or make start-up shorter/,
    );
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    expect(h.requests({ route: "job-take" })).toEqual([]);
    // Said at start: the handler's own setup bound exceeds the budget.
    const warning = sink.lines.find((l) => String(l["message"]).startsWith("start-up budget:"));
    expect(warning?.["message"]).toBe(
      "start-up budget: the timeouts the handler sets (setupTimeoutMs 30000 ms = 30000 ms) exceed RUNPOD_INIT_TIMEOUT (20 s); " +
        "a start-up still running 19 s after the process started ends unfit. Raise RUNPOD_INIT_TIMEOUT on the endpoint (seconds) for a longer start, or lower the timeouts",
    );
  });

  it("says nothing and stays out of the way when the configured timeouts fit and start-up finishes in time", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const w = await workerFor(
      h,
      defineHandler({ setup: () => ({ ok: true }), setupTimeoutMs: 1_000, handler: ({ state }) => state }),
      {
        env: { ...h.workerEnv("local"), RUNPOD_ENDPOINT_ID: "local", RUNPOD_INIT_TIMEOUT: "30" },
        sink,
      },
    );
    const job = await h.waitForJob(h.enqueue("local", { input: {} }), { timeoutMs: 10_000 });
    expect(job.output).toEqual({ ok: true });
    // The budget ran (in memory too, without a heartbeat thread) and said nothing.
    expect(w.parts).toContain("start-up budget");
    expect(sink.lines.some((l) => String(l["message"]).startsWith("start-up budget"))).toBe(false);
    await w.close();
    expect(await w.stopped).toEqual({ reason: "closed", exitCode: 0 });
  });

  it("reads RUNPOD_INIT_TIMEOUT in seconds, defaults to the platform's 7 minutes, and refuses what is not a duration, naming it", () => {
    expect(DEFAULT_INIT_TIMEOUT_S).toBe(420);
    expect(readStartupBudget({}, 1_000)).toEqual({ totalMs: 420_000, fromEnv: false, startedAt: 1_000 });
    expect(readStartupBudget({ RUNPOD_INIT_TIMEOUT: "800" }, 0).totalMs).toBe(800_000);
    expect(() => readStartupBudget({ RUNPOD_INIT_TIMEOUT: "7m" }, 0)).toThrow(
      'bad environment: RUNPOD_INIT_TIMEOUT must be the cold-start limit in seconds, a number above 0 and at most 2147483, got "7m"',
    );
    expect(() => readStartupBudget({ RUNPOD_INIT_TIMEOUT: "0" }, 0)).toThrow("RUNPOD_INIT_TIMEOUT must be");
    // 420 s less a 15 s margin, from the start.
    const budget = readStartupBudget({}, 10_000);
    expect(budgetLeftMs(budget, 10_000)).toBe(405_000);
    expect(budgetLeftMs(budget, 10_000 + 500_000)).toBe(0);
  });

  it("cuts a setup left at its default bound without a warning: the default is capped, not configured", async () => {
    await using h = await testHarness();
    const sink = logSink();
    const w = await workerFor(h, defineHandler({ setup: endlessSetup, handler: () => "never" }), {
      env: {
        ...h.workerEnv("local", { podId: "pod-default" }),
        RUNPOD_ENDPOINT_ID: "local",
        RUNPOD_INIT_TIMEOUT: "1",
      },
      sink,
    });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const pings = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(pings.map((p) => p.query["check"])).toEqual(["startup"]);
    expect(sink.lines.some((l) => String(l["message"]).startsWith("start-up budget"))).toBe(false);
  });

  it("adds the bounds the handler sets as its phases run: the warm cache, then the slowest sidecar, then setup", () => {
    const d = defineHandler({
      setup: () => undefined,
      setupTimeoutMs: 60_000,
      sidecar: [
        { name: "a", command: ["x"], ready: { port: 1 }, readyTimeoutMs: 5_000 },
        { name: "c", command: ["x"], ready: { port: 3 } },
        { name: "b", command: ["x"], ready: { port: 2 }, readyTimeoutMs: 9_000 },
      ],
      handler: () => "x",
    });
    expect(configuredStartup(d)).toEqual({
      parts: ['sidecar "b" readyTimeoutMs 9000 ms', "setupTimeoutMs 60000 ms"],
      totalMs: 69_000,
    });
  });
});
