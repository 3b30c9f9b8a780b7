import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";
import { logSink, waitFor } from "../support/workers.js";

/**
 * Issue 17, item 1: without RUNPOD_POD_ID the platform's Python SDK sends no heartbeat (it is not
 * running on the platform) but still takes jobs, under an id it makes up. runlet does the same.
 */
describe("a worker without RUNPOD_POD_ID", () => {
  it("sends no ping, says so once, and still takes and finishes jobs under its generated id", async () => {
    // A long heartbeat timeout: this worker never pings, so the harness would otherwise lapse it.
    await using h = await startHarness({ takeTimeoutMs: 300, heartbeatTimeoutMs: 600_000 });
    const { RUNPOD_POD_ID: _dropped, ...env } = h.workerEnv("local", { pingIntervalMs: 100 });
    const sink = logSink();
    await using w = await startWorker(defineHandler({ handler: ({ input }) => ({ echo: input }) }), {
      env: { ...env, RUNPOD_ENDPOINT_ID: "local" },
      logDestination: sink.stream,
      shutdownGraceMs: 2_000,
      flushTimeoutMs: 2_000,
    });
    const ids = [h.enqueue("local", { input: 1 }), h.enqueue("local", { input: 2 })];
    for (const [i, id] of ids.entries()) {
      expect(await h.waitForJob(id, { timeoutMs: 20_000 })).toMatchObject({
        status: "COMPLETED",
        output: { echo: i + 1 },
        workerId: w.id,
      });
    }
    // A worker with a pod id beside it, pinging at the same interval: once it has pinged ten
    // times, ten intervals have passed for this one too, which sent no ping in them.
    await using _witness = await startWorker(defineHandler({ handler: () => "witness" }), {
      env: {
        ...h.workerEnv("local", { pingIntervalMs: 100, podId: "witness" }),
        RUNPOD_ENDPOINT_ID: "local",
      },
      logDestination: logSink().stream,
      shutdownGraceMs: 2_000,
      flushTimeoutMs: 2_000,
    });
    const pings = () => h.requests({ route: "ping" });
    await waitFor("the witness to ping ten times", () => pings().length >= 10, 20_000);
    expect(pings().filter((r) => !r.path.endsWith("/witness"))).toEqual([]);
    expect(w.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(h.requests({ route: "job-take" }).find((r) => !r.path.endsWith("/witness"))?.path).toBe(
      `/v2/local/job-take/${w.id}`,
    );
    const notices = sink.lines.filter((l) => String(l["message"]).includes("RUNPOD_POD_ID"));
    expect(notices.map((l) => [l["level"], l["message"]])).toEqual([
      [
        "INFO",
        "RUNPOD_POD_ID is not set, so this worker is not running on the platform: it sends no heartbeat pings, and takes jobs under a generated id",
      ],
    ]);
  });
});
