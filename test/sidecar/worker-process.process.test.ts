import { describe, expect, it } from "vitest";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { alive, eventsOf, freePort, scratch } from "../support/sidecar-rig.js";
import { testHarness, waitFor } from "../support/workers.js";

// The worker as a real process (`runlet start`, built dist/) with the fixture model server as its
// sidecar: what happens to the sidecar when the worker is stopped, or killed.

describe("a worker process with a sidecar", () => {
  it("leaves no process behind when the worker is killed with SIGKILL", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const c = startRunletChild(h, "test/fixtures/sidecar-handler.ts", {
      podId: "pod-sigkill",
      env: { RUNPOD_ENDPOINT_ID: "local", SIDECAR_PORT: String(port), EVENTS_FILE: tmp.events },
    });
    try {
      const id = h.enqueue("local", { input: {} });
      expect((await h.waitForJob(id, { timeoutMs: 30_000 })).output).toEqual({
        object: "list",
        data: [{ id: "fixture-model", object: "model" }],
      });
      const started = eventsOf(tmp.events).find((e) => e.event === "started")!;
      const pids = [started["pid"] as number, started["grandchild"] as number];
      expect(pids.every(alive)).toBe(true);
      // Nothing of the worker runs after this: no handler, no exit hook.
      c.child.kill("SIGKILL");
      expect(await c.exited).toEqual({ code: null, signal: "SIGKILL" });
      // The guard reads EOF on the pipe only the worker held, and takes the group down.
      await waitFor("the sidecar and its child to be gone", () => !pids.some(alive), 10_000);
      expect(eventsOf(tmp.events).map((e) => e.event)).toContain("sigterm");
    } finally {
      await stopRunletChild(c);
    }
  }, 60_000);

  it("stops the sidecar on SIGTERM after the jobs and exits 0", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const c = startRunletChild(h, "test/fixtures/sidecar-handler.ts", {
      podId: "pod-sigterm",
      env: { RUNPOD_ENDPOINT_ID: "local", SIDECAR_PORT: String(port), EVENTS_FILE: tmp.events },
    });
    try {
      const id = h.enqueue("local", { input: {} });
      await h.waitForJob(id, { timeoutMs: 30_000 });
      const pid = eventsOf(tmp.events).find((e) => e.event === "started")!["pid"] as number;
      c.child.kill("SIGTERM");
      expect(await c.exited).toEqual({ code: 0, signal: null });
      expect(eventsOf(tmp.events).map((e) => e.event)).toEqual(["started", "sigterm"]);
      expect(alive(pid)).toBe(false);
      expect(c.output()).toContain('"message":"sidecar \\"llm\\" stopped"');
    } finally {
      await stopRunletChild(c);
    }
  }, 60_000);
});
