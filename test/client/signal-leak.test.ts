import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createClient } from "../../src/client/index.js";
import { startHarness } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { startManagementServer } from "../support/management-servers.js";
import { dependantsOf } from "../support/signal-dependants.js";

/**
 * A caller may pass one long-lived signal (a request's, a process's) to many calls. Each call's
 * own deadline is linked to it for the call only: `AbortSignal.any([signal, deadline])` would
 * leave one entry per call in the caller's signal on Node 20 (nodejs/node#55351).
 */
const ROUNDS = 40;

/**
 * Every `AbortSignal.timeout` made while `run` runs, so a test can check that none still holds a
 * listener once the calls are done: Node keeps a timeout signal with abort listeners (and what
 * they reach) alive until it fires, so a finished 10-minute wait() held ~3 KiB for 10 minutes.
 */
async function timeoutSignalsDuring(run: () => Promise<void>): Promise<AbortSignal[]> {
  const made: AbortSignal[] = [];
  const original = AbortSignal.timeout.bind(AbortSignal);
  vi.spyOn(AbortSignal, "timeout").mockImplementation((ms: number) => {
    const signal = original(ms);
    made.push(signal);
    return signal;
  });
  await run();
  return made;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a caller's long-lived signal across many calls", () => {
  it("keeps nothing of each job client wait() (status polls under a deadline)", async () => {
    await using h = await startHarness({ takeTimeoutMs: 200 });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
    const caller = new AbortController();
    const timeouts = await timeoutSignalsDuring(async () => {
      for (let i = 0; i < ROUNDS; i++) {
        const { id } = await ep.run({ input: { i } });
        await ep.cancel(id);
        // Terminal at once: one status read under the wait's own deadline, linked to the caller's signal.
        expect((await ep.wait(id, { signal: caller.signal, timeoutMs: 10_000 })).status).toBe("CANCELLED");
      }
    });
    expect(dependantsOf(caller.signal)).toBe(0);
    expect(getEventListeners(caller.signal, "abort")).toEqual([]);
    expect(timeouts.filter((s) => getEventListeners(s, "abort").length > 0)).toEqual([]);
  });

  it("keeps nothing of each management call (each attempt's timeout)", async () => {
    await using server = await startManagementServer({ apiKey: "mgmt-signal-key-1" });
    const mgmt = createManagementClient({ apiKey: "mgmt-signal-key-1", baseUrl: server.url });
    const caller = new AbortController();
    const timeouts = await timeoutSignalsDuring(async () => {
      for (let i = 0; i < ROUNDS; i++) {
        await mgmt.request({ method: "GET", path: "/templates", signal: caller.signal });
      }
    });
    expect(dependantsOf(caller.signal)).toBe(0);
    expect(getEventListeners(caller.signal, "abort")).toEqual([]);
    expect(timeouts.filter((s) => getEventListeners(s, "abort").length > 0)).toEqual([]);
  });
});
