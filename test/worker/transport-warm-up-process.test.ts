import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";

// Issue 43, item 4, end to end: a `runlet start` process reaches its first take and posts its
// first result on node:http, loads undici's Pool file (never undici's public entry) once idle
// after that job, and serves the next job through it. NODE_DEBUG=module makes Node name every
// CommonJS file it loads on stderr (undici is CommonJS), which is what is read here.

const POOL_FILE = "undici/lib/dispatcher/pool.js";

describe("a worker process's transport (issue 43)", () => {
  it("loads undici's Pool only when idle after its first job, and serves the next job with it", async () => {
    const h = await startHarness({ endpoints: [{ id: "local" }], takeTimeoutMs: 1_000 });
    const c = startRunletChild(h, "examples/echo/handler.ts", { env: { NODE_DEBUG: "module" } });
    try {
      // Idle before any job (its takes say job_in_progress=0): no job yet, so nothing loads.
      // Waiting longer only makes a wrong load more likely to show.
      for (let i = 0; i < 600 && !c.output().includes("worker ready"); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(c.output()).toContain("worker ready");
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(c.output()).not.toContain(POOL_FILE);
      const first = await h.waitForJob(h.enqueue("local", { input: { text: "one" } }), { timeoutMs: 60_000 });
      expect(first.status).toBe("COMPLETED");
      // Idle now (a take saying job_in_progress=0 in flight, no post): the Pool loads in the background.
      for (let i = 0; i < 300 && !c.output().includes(POOL_FILE); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(c.output()).toContain(POOL_FILE);
      const second = await h.waitForJob(h.enqueue("local", { input: { text: "two" } }), {
        timeoutMs: 60_000,
      });
      expect(second.status).toBe("COMPLETED");
      // undici's public entry (fetch, WebSocket, the cache) is never loaded by the worker.
      expect(c.output()).not.toMatch(/undici[/\\]index\.js/);
    } finally {
      await stopRunletChild(c);
      await h.close();
    }
  });
});
