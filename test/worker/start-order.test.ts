import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { freePort } from "../support/sidecar-rig.js";
import { THREAD_START_MS } from "../support/thread-allowance.js";
import { testHarness, workerFor } from "../support/workers.js";

// Issue 41: an isolation thread's `setup` runs in the runner's own start-up phase, after fitness,
// cache and sidecars, so it can warm its sidecar up. Before, the runner's constructor spawned the
// first thread, whose setup ran during the fitness phase: with a slow healthCheck it reached for
// a sidecar not yet started, failed, and the worker went unfit (this test failed so on c4947a0).

const MODULE = fileURLToPath(new URL("../fixtures/ordered-thread.ts", import.meta.url));

describe("the order of start-up under isolation threads", () => {
  it(
    "runs a thread's setup after the health check and the sidecar, so setup can warm its sidecar",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "runlet-order-"));
      const file = join(dir, "order.jsonl");
      const port = await freePort();
      // Read by the fixture at import, in this process and in its threads (they copy the env at spawn).
      Object.assign(process.env, { ORDER_FILE: file, ORDER_PORT: String(port), ORDER_HEALTH_MS: "3000" });
      try {
        // On loopback: the part list checked below holds the heartbeat, which a worker in memory has not.
        await using h = await testHarness();
        const { default: definition } = await import("../fixtures/ordered-thread.js");
        await using w = await workerFor(h, definition, { handlerModule: MODULE });
        const id = h.enqueue("local", { input: {} });
        // A worker that went unfit (its setup failed) takes no job: fail at once, saying so.
        const job = await Promise.race([
          h.waitForJob(id, { timeoutMs: THREAD_START_MS }),
          w.stopped.then((info) => {
            throw new Error(
              `the worker stopped before the job ran: ${JSON.stringify(info)}; ${readFileSync(file, "utf8")}`,
            );
          }),
        ]);
        const events = readFileSync(file, "utf8")
          .trim()
          .split("\n")
          .map((line) => (JSON.parse(line) as { event: string }).event);
        expect(events).toEqual([
          "health started",
          "health done",
          "started",
          "setup started",
          "setup warmed up",
        ]);
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual({ warmUp: 200 });
        expect(w.parts).toEqual([
          "platform connection",
          "heartbeat",
          "start-up budget",
          "fitness checks",
          "sidecars",
          "runner",
          "job-stop poll",
          "reports",
          "jobs",
          "take loop",
        ]);
      } finally {
        for (const key of ["ORDER_FILE", "ORDER_PORT", "ORDER_HEALTH_MS"]) delete process.env[key];
        rmSync(dir, { recursive: true, force: true });
      }
    },
    THREAD_START_MS + 20_000,
  );
});
