import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

// docs/protocol.md, "Results": the final post of a streaming job uses isStream=true, whatever the job ends
// with — the reference worker sends true for every generator handler, errors included.

/** The query of the one final job-done post of `jobId`. */
function finalQuery(h: Harness, jobId: string): Readonly<Record<string, string>> {
  const posts = h
    .requests({ route: "job-done" })
    .filter((r) => r.path.includes(`/${jobId}`) && !r.body.includes('"IN_PROGRESS"'));
  expect(posts).toHaveLength(1);
  return posts[0]!.query;
}

describe("the final post of a generator job", () => {
  it("uses isStream=true when the generator throws after an item", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        async *handler() {
          yield "first";
          throw new Error("model crashed");
        },
      }),
    );
    try {
      const id = h.enqueue("local", { input: 1 });
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(finalQuery(h, id)).toEqual({ gpu: "LOCAL", isStream: "true" });
    } finally {
      await w.close();
    }
  });

  it("uses isStream=true when the generator throws before any item", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        // biome-ignore lint/correctness/useYield: the generator fails before its first item on purpose
        async *handler() {
          throw new Error("no weights");
        },
      }),
    );
    try {
      const id = h.enqueue("local", { input: 1 });
      expect((await h.waitForJob(id, { timeoutMs: 10_000 })).status).toBe("FAILED");
      expect(finalQuery(h, id)).toEqual({ gpu: "LOCAL", isStream: "true" });
    } finally {
      await w.close();
    }
  });

  it("uses isStream=true when the generator times out", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        executionTimeoutMs: 300,
        async *handler({ signal }) {
          yield "first";
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          signal.throwIfAborted();
        },
      }),
    );
    try {
      const id = h.enqueue("local", { input: 1 });
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toContain("timed out");
      expect(finalQuery(h, id)).toEqual({ gpu: "LOCAL", isStream: "true" });
    } finally {
      await w.close();
    }
  });

  it("uses isStream=true when a shutdown cuts the generator", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        async *handler({ signal }) {
          yield "first";
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        },
      }),
      { shutdownGraceMs: 100 },
    );
    try {
      const id = h.enqueue("local", { input: 1 });
      await waitFor("the first item", () => h.requests({ route: "job-stream" }).length === 1);
      await w.close();
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.error).toContain("worker shutting down");
      expect(finalQuery(h, id)).toEqual({ gpu: "LOCAL", isStream: "true" });
    } finally {
      await w.close();
    }
  });
});
