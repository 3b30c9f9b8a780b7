import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";
import { platformUrls } from "../../src/worker/platform/platform-urls.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

// Answers and environments the reference worker copes with: a 2xx job-take other than 200, a
// `null` take body, a jobsToStop list with non-strings, a take URL without /job-take/, adjusted
// config, and the ping list after a job-stop.

describe("unusual platform answers and environments", () => {
  it("reads a 202 job-take with a body as a job, and a 200 `null` as no job", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const seen: unknown[] = [];
    h.injectFault("job-take", { status: 200, body: "null" });
    h.injectFault("job-take", { status: 202, body: JSON.stringify({ id: "odd-202", input: { n: 7 } }) });
    const w = await workerFor(
      h,
      defineHandler({
        handler: ({ job, input }) => {
          seen.push([job.id, input]);
          return "ok";
        },
      }),
      { sink },
    );
    try {
      await waitFor("the 202 job to run", () => seen.length === 1);
      expect(seen).toEqual([["odd-202", { n: 7 }]]);
      const id = h.enqueue("local", { input: 1 });
      expect((await h.waitForJob(id, { timeoutMs: 10_000 })).status).toBe("COMPLETED");
      expect(sink.lines.filter((l) => l["code"] === "RUNLET_PROTOCOL_BAD_JOB")).toEqual([]);
      expect(sink.lines.filter((l) => String(l["message"]).startsWith("job-take failed"))).toEqual([]);
    } finally {
      await w.close();
    }
  });

  it("stops the string ids of a jobsToStop list with other items, and drops the job from the ping list at once", async () => {
    await using h = await testHarness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let aborted = false;
    const w = await workerFor(
      h,
      defineHandler({
        hardStopGraceMs: 30_000,
        handler: async ({ signal }) => {
          signal.addEventListener("abort", () => {
            aborted = true;
          });
          // Ignores its signal until the test lets it go: the slot stays busy after the stop.
          await gate;
          return "late";
        },
      }),
      { pingIntervalMs: 100 },
    );
    try {
      const id = h.enqueue("local", { input: 1 });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS");
      await waitFor("a ping naming the job", () =>
        h.requests({ route: "ping" }).some((r) => r.query["job_id"] === id),
      );
      h.injectFault("job-stop", { status: 200, body: JSON.stringify({ jobsToStop: [42, id, null] }) });
      await waitFor("the handler's signal to abort", () => aborted);
      const stopSeq = h.requests({ route: "job-stop" }).at(-1)!.seq;
      await waitFor("a ping after the stop", () =>
        h.requests({ route: "ping" }).some((r) => r.seq > stopSeq),
      );
      await waitFor(
        "two pings after the stop",
        () => h.requests({ route: "ping" }).filter((r) => r.seq > stopSeq).length >= 2,
      );
      // The first ping after the stop may have been sent before the list changed; the next may not.
      const later = h.requests({ route: "ping" }).filter((r) => r.seq > stopSeq);
      expect(later.at(-1)!.query).toEqual({
        gpu: "LOCAL",
        runpod_version: expect.stringMatching(/^runlet\//),
      });
      // The handler still runs, so the slot is still busy: no take is asked for meanwhile.
      expect(w.jobIds).toEqual([id]);
      release();
      await waitFor("the slot to free", () => w.jobIds.length === 0);
      expect(h.requests({ route: "job-done" }).filter((r) => r.path.includes(id))).toEqual([]);
    } finally {
      release();
      await w.close();
    }
  });

  it("logs config adjustments once at start", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const w = await workerFor(h, defineHandler({ handler: () => "ok" }), { sink, pingIntervalMs: 50 });
    try {
      await waitFor("the worker to start", () => sink.lines.some((l) => l["message"] === "worker started"));
      const warnings = sink.lines.filter((l) => String(l["message"]).startsWith("RUNPOD_PING_INTERVAL"));
      expect(warnings.map((l) => [l["level"], l["message"]])).toEqual([
        ["WARN", "RUNPOD_PING_INTERVAL=50 adjusted to 100 ms (an integer from 100 to 600000)"],
      ]);
    } finally {
      await w.close();
    }
  });

  it("runs without job-stop when the take URL has no /job-take/ segment, and batches by adding batch_size", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const env = {
      ...h.workerEnv("local", { podId: "pod-odd" }),
      RUNPOD_ENDPOINT_ID: "local",
      RUNPOD_WEBHOOK_GET_JOB: `${h.url}/v2/local/take-here/$ID?gpu=$RUNPOD_GPU_TYPE_ID`,
    };
    const w = await startWorker(defineHandler({ input: z.unknown(), concurrency: 3, handler: () => "ok" }), {
      env,
      connect: () => h.connect(),
      logDestination: sink.stream,
      retryBaseMs: 20,
      retryCapMs: 100,
      shutdownGraceMs: 500,
      flushTimeoutMs: 500,
    });
    try {
      await waitFor("the no-/job-take/ warning", () =>
        sink.lines.some((l) => String(l["message"]).includes("no /job-take/ segment")),
      );
      // The takes go to a path the harness does not serve: faults, backed off; the worker lives on.
      await waitFor("a failed take", () =>
        sink.lines.some((l) => l["message"] === "job-take failed; backing off"),
      );
      // Answered by the harness (404, no such route), not refused for want of a listener.
      const failed = sink.lines.find((l) => l["message"] === "job-take failed; backing off");
      expect(String(failed?.["reason"])).toContain("no route for GET /v2/local/take-here/pod-odd");
      expect(sink.lines.filter((l) => String(l["message"]).includes("no /job-take/ segment"))).toHaveLength(
        1,
      );
      expect(h.requests({ route: "job-stop" })).toEqual([]);
    } finally {
      await w.close();
    }
    expect(await w.stopped).toEqual({ reason: "closed", exitCode: 0 });
    const batch = new URL(
      platformUrls({
        jobTakeUrl: "http://platform.test/v2/ep/take-here/$ID?gpu=X",
        jobDoneUrl: "http://platform.test/v2/ep/done/$ID",
        jobStreamUrl: undefined,
        pingUrl: undefined,
        podId: "p1",
        gpuTypeId: "X",
      }).take(3, true),
    );
    expect([batch.pathname, Object.fromEntries(batch.searchParams)]).toEqual([
      "/v2/ep/take-here/p1",
      { gpu: "X", batch_size: "3", job_in_progress: "1" },
    ]);
  });
});
