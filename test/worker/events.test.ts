import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler, JobError } from "../../src/index.js";
import { testHarness, waitFor, workerFor } from "./helpers.js";

describe("worker lifecycle events", () => {
  it("reports taken, started, progress, finished, failed, retrying and stopped, in order", async () => {
    await using h = await testHarness();
    const handler = defineHandler({
      input: z.object({ fail: z.boolean() }),
      handler: ({ input, progress }) => {
        if (input.fail) throw new JobError("bad luck");
        progress({ step: 1 });
        return { ok: true };
      },
    });
    const worker = await workerFor(h, handler);
    const seen: string[] = [];
    const names = ["taken", "started", "progress", "finished", "failed", "retrying", "stopped"] as const;
    for (const name of names) {
      worker.on(name, (event) => {
        const { jobId, ...rest } = event as { jobId?: string } & Record<string, unknown>;
        const detail =
          name === "finished" || name === "failed"
            ? { ...rest, executionTimeMs: typeof rest["executionTimeMs"] }
            : name === "retrying"
              ? { what: rest["what"], status: rest["status"], attempt: rest["attempt"] }
              : rest;
        seen.push(`${name} ${jobId ?? "-"} ${JSON.stringify(detail)}`);
      });
    }
    // A listener that throws is logged and ignored; the job still finishes.
    worker.on("started", () => {
      throw new Error("metrics hook broke");
    });

    const okId = h.enqueue("local", { input: { fail: false } });
    await waitFor("the first job to complete", () => h.job(okId)?.status === "COMPLETED");
    // The failure's post answers 503 once: the worker retries it.
    h.injectFault("job-done", { status: 503 }, 1);
    const badId = h.enqueue("local", { input: { fail: true } });
    await waitFor("the second job to fail", () => h.job(badId)?.status === "FAILED");
    await worker.close();

    expect(seen).toEqual([
      `taken ${okId} {}`,
      `started ${okId} {}`,
      `progress ${okId} {"body":"{\\"step\\":1}"}`,
      `finished ${okId} {"executionTimeMs":"number","metrics":{}}`,
      `taken ${badId} {}`,
      `started ${badId} {}`,
      `failed ${badId} {"executionTimeMs":"number","metrics":{},"code":"RUNLET_JOB_FAILED","message":"bad luck"}`,
      `retrying ${badId} {"what":"the final result","status":503,"attempt":0}`,
      `stopped - {"reason":"closed","exitCode":0}`,
    ]);
  });
});
