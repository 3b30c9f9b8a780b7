import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { HandlerDefinition } from "../../src/handler/index.js";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Issue 17, item 2: ctx.refreshWorker() finishes one job successfully and has the worker replaced
 * (Python's `{"refresh_worker": true}`), against the harness's routes (in memory: the subject is
 * the refresh, not the socket).
 */
describe("ctx.refreshWorker()", () => {
  it("completes the job with its output and stopPod: true, takes no further job, and stops as a refresh", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        input: z.object({ text: z.string(), wedged: z.boolean().default(false) }),
        handler: (ctx) => {
          if (ctx.input.wedged) ctx.refreshWorker();
          return { text: ctx.input.text.toUpperCase() };
        },
      }),
    );
    try {
      const healthy = h.enqueue("local", { input: { text: "one" } });
      await waitFor("the first job", () => h.job(healthy)?.status === "COMPLETED");
      expect(h.job(healthy)).toMatchObject({ output: { text: "ONE" }, stopPod: false });

      const wedged = h.enqueue("local", { input: { text: "two", wedged: true } });
      expect(await w.stopped).toEqual({ reason: "refresh", exitCode: 0 });
      expect(h.job(wedged)).toMatchObject({ status: "COMPLETED", output: { text: "TWO" }, stopPod: true });
      const posts = h.requests({ route: "job-done" }).filter((r) => r.path.endsWith(`/${wedged}`));
      expect(posts.map((r) => [r.query["isStream"], JSON.parse(r.body) as unknown])).toEqual([
        ["false", { output: { text: "TWO" }, stopPod: true }],
      ]);
      // No job-take after that result: a job queued now waits for the next worker.
      const done = posts[0]!.seq;
      expect(
        h.requests().filter((r) => (r.route === "job-take" || r.route === "job-take-batch") && r.seq > done),
      ).toEqual([]);
      const next = h.enqueue("local", { input: { text: "three" } });
      expect(h.job(next)?.status).toBe("IN_QUEUE");
    } finally {
      await w.close();
    }
  });

  it("does the same from an isolation thread", async () => {
    const module = fileURLToPath(new URL("./thread-refresh-handler.ts", import.meta.url));
    const definition = (await import(module)).default as HandlerDefinition;
    await using h = memoryHarness();
    const w = await workerFor(h, definition, { handlerModule: module });
    try {
      const wedged = h.enqueue("local", { input: { text: "two", wedged: true } });
      expect(await w.stopped).toEqual({ reason: "refresh", exitCode: 0 });
      expect(h.job(wedged)).toMatchObject({ status: "COMPLETED", output: { text: "TWO" }, stopPod: true });
    } finally {
      await w.close();
    }
  });
});
