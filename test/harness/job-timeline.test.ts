import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { JobEntry } from "../../src/harness/jobs/job-entry.js";
import { JobTimelines, MAX_SPANS_PER_JOB, MAX_TIMELINE_JOBS } from "../../src/harness/jobs/job-timeline.js";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

describe("the harness's job timeline", () => {
  it("records queue, setup (the worker's first job only), take, handler, stream and result from what it sees", async () => {
    // On loopback: the setup span runs from the worker's first ping; a worker in memory sends none.
    await using h = await testHarness();
    const handler = defineHandler({
      input: z.object({}),
      async *handler() {
        yield "a";
        yield "b";
      },
    });
    const first = h.enqueue("local", { input: {} });
    const worker = await workerFor(h, handler, { pingIntervalMs: 50 });
    await waitFor("the first job", () => h.job(first)?.status === "COMPLETED");
    const second = h.enqueue("local", { input: {} });
    await waitFor("the second job", () => h.job(second)?.status === "COMPLETED");
    await worker.close();

    const spans = h.timeline(first);
    const names = spans.map((s) => s.name);
    expect(names).toEqual(["queue", "setup", "take", "handler", "stream", "result"]);
    const byName = Object.fromEntries(spans.map((s) => [s.name, s]));
    // Setup ends at the worker's first take, before the job's hand-out.
    expect(byName["setup"]!.end!).toBeLessThanOrEqual(byName["take"]!.start);
    expect(byName["queue"]?.end).toBe(byName["take"]?.start);
    expect(byName["take"]?.attributes["worker"]).toBe(worker.id);
    expect(byName["stream"]?.attributes["chunks"]).toBe(2);
    // The bytes the chunks' posts carried, each at least its chunk's JSON.
    const chunkBytes = h.job(first)!.stream.reduce((n, c) => n + Buffer.byteLength(JSON.stringify(c)), 0);
    expect(byName["stream"]?.attributes["bytes"]).toBeGreaterThanOrEqual(chunkBytes);
    expect(byName["stream"]?.attributes["bytes"]).toBeLessThan(chunkBytes + 2 * 1024);
    expect(byName["result"]?.attributes["status"]).toBe("COMPLETED");
    expect(byName["handler"]?.end).toBe(byName["result"]?.start);
    // The same worker's next job has no setup.
    expect(h.timeline(second).map((s) => s.name)).toEqual(["queue", "take", "handler", "stream", "result"]);
  });

  it("ends a first job's setup at the worker's first take, not when a job finally came", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({ input: z.object({}), handler: () => "ok" });
    const worker = await workerFor(h, handler);
    await waitFor("the worker's first take", () => h.requests({ route: "job-take" }).length > 0);
    // The worker waits idle for work for a while.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const id = h.enqueue("local", { input: {} });
    await waitFor("the job", () => h.job(id)?.status === "COMPLETED");
    await worker.close();
    const byName = Object.fromEntries(h.timeline(id).map((s) => [s.name, s]));
    expect(byName["take"]!.start - byName["setup"]!.end!).toBeGreaterThanOrEqual(40);
  });

  it("is bounded: the oldest jobs' timelines go first, and a job requeued for ever stops adding spans", () => {
    let now = 0;
    const timelines = new JobTimelines(
      () => now,
      () => undefined,
    );
    const entry = (id: string, status: string): JobEntry =>
      ({
        id,
        status,
        createdAt: now,
        startedAt: now,
        finishedAt: undefined,
        workerId: "w",
      }) as unknown as JobEntry;
    for (let i = 0; i < MAX_TIMELINE_JOBS + 10; i++) timelines.changed(entry(`j${i}`, "IN_QUEUE"));
    expect(timelines.spans("j0")).toEqual([]);
    expect(timelines.spans(`j${MAX_TIMELINE_JOBS + 9}`).map((s) => s.name)).toEqual(["queue"]);
    for (let i = 0; i < 1_000; i++) {
      now += 1;
      timelines.changed(entry("loop", i % 2 === 0 ? "IN_QUEUE" : "IN_PROGRESS"));
    }
    expect(timelines.spans("loop").length).toBe(MAX_SPANS_PER_JOB);
  });
});
