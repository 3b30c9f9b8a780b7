import { getEventListeners } from "node:events";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { resolveWorkerConfig } from "../../src/worker/config.js";
import { pollJobStops } from "../../src/worker/job/stop-poll.js";
import { runTakeLoop } from "../../src/worker/job/take-loop.js";
import { PlatformHttp } from "../../src/worker/platform/platform-http.js";
import { dependantsOf } from "../support/signal-dependants.js";
import { memoryHarness, waitFor } from "../support/workers.js";

/**
 * The take loop and the job-stop poll run for the worker's whole life, each request bounded by the
 * worker's long-lived `closing` signal. Whatever a request links to that signal must be gone once
 * the request ends: on Node 20, `AbortSignal.any([closing, ...])` leaves one entry per call in
 * `closing`'s dependants for ever (nodejs/node#55351), so a worker grows by one per take and poll.
 */

const ROUNDS = 40;
const silent = pino({ level: "silent" });

describe("the worker's long-lived signal", () => {
  it("keeps no listener or dependant per job-take after many takes", async () => {
    await using h = memoryHarness();
    const config = resolveWorkerConfig({ env: h.workerEnv("local"), retryBaseMs: 1, retryCapMs: 1 });
    const http = new PlatformHttp(config.apiKey, () => h.connect());
    const closing = new AbortController();
    // Each take gets a 500 at once and is retried after 1 ms: many takes in little time.
    h.injectFault("job-take", { status: 500 }, ROUNDS);
    // An empty board with one slot: the loop alone, no job ever admitted.
    const loop = runTakeLoop(
      { config, http, log: silent, closing: closing.signal },
      { size: 0, consultConcurrency: () => 1, waitForChange: async () => undefined, admit: () => undefined },
    );
    try {
      await waitFor("the takes", () => h.requests({ route: "job-take" }).length >= ROUNDS);
      expect(dependantsOf(closing.signal)).toBe(0);
      // At most the one request in flight holds a listener.
      expect(getEventListeners(closing.signal, "abort").length).toBeLessThanOrEqual(1);
    } finally {
      closing.abort();
      await loop;
      await http.close();
    }
    expect(getEventListeners(closing.signal, "abort")).toEqual([]);
  });

  it("keeps no listener or dependant per job-stop poll after many polls", async () => {
    await using h = memoryHarness();
    const config = resolveWorkerConfig({ env: h.workerEnv("local"), retryBaseMs: 1, retryCapMs: 1 });
    const http = new PlatformHttp(config.apiKey, () => h.connect());
    const closing = new AbortController();
    h.injectFault("job-stop", { status: 500 }, ROUNDS);
    // A board that always holds one job, so the poll never pauses for want of one.
    const loop = pollJobStops(
      { config, http, log: silent, closing: closing.signal },
      { size: 1, waitForChange: async () => undefined, stop: () => undefined },
      1,
    );
    try {
      await waitFor("the polls", () => h.requests({ route: "job-stop" }).length >= ROUNDS);
      expect(dependantsOf(closing.signal)).toBe(0);
      expect(getEventListeners(closing.signal, "abort").length).toBeLessThanOrEqual(1);
    } finally {
      closing.abort();
      await loop;
      await http.close();
    }
    expect(getEventListeners(closing.signal, "abort")).toEqual([]);
  });
});
