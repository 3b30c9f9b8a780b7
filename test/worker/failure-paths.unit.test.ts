import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

/** Failure paths of issue 12: each one ends as that job's failure, never as a crash or cross-talk. */
describe("failure paths of a job", () => {
  it("fails a job whose input schema throws inside .transform() or .refine(), naming the field, and keeps running", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const handler = defineHandler({
      concurrency: 2,
      input: z.object({
        text: z.string().transform((value) => {
          if (value === "boom") throw new Error("transform exploded");
          return value.toUpperCase();
        }),
        n: z
          .number()
          .optional()
          .refine((value) => {
            if (value === 13) throw new TypeError("refine exploded");
            return true;
          }),
      }),
      handler: ({ input }) => ({ text: input.text }),
    });
    await using _w = await workerFor(h, handler, { sink });
    const bad = h.enqueue("local", { input: { text: "boom" } });
    const badRefine = h.enqueue("local", { input: { text: "ok", n: 13 } });
    const good = h.enqueue("local", { input: { text: "fine" } });
    const badJob = await h.waitForJob(bad);
    const badRefineJob = await h.waitForJob(badRefine);
    const goodJob = await h.waitForJob(good);
    expect(badJob.status).toBe("FAILED");
    expect(badJob.error).toBe(
      "input is invalid:\n✖ the input schema threw Error: transform exploded\n  → at text",
    );
    expect(badRefineJob.status).toBe("FAILED");
    expect(badRefineJob.error).toBe(
      "input is invalid:\n✖ the input schema threw TypeError: refine exploded\n  → at n",
    );
    expect(goodJob.status).toBe("COMPLETED");
    expect(goodJob.output).toEqual({ text: "FINE" });
    const finished = sink.lines.filter((l) => l["message"] === "Finished." && l["code"] !== undefined);
    expect(finished.map((l) => l["code"])).toEqual(["RUNLET_INPUT_INVALID", "RUNLET_INPUT_INVALID"]);
    // The worker goes on: a job after the failures still runs.
    const after = h.enqueue("local", { input: { text: "after" } });
    expect((await h.waitForJob(after)).output).toEqual({ text: "AFTER" });
  });

  it("stops retrying a job's posts once a job-stop discarded the job, freeing its slot", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({
      concurrency: 1,
      handler: ({ input, signal, progress }) => {
        if (input === "next") return "next";
        progress({ step: 1 });
        return new Promise((resolve) => signal.addEventListener("abort", () => resolve("after stop")));
      },
    });
    // At close the next job's result is still being refused: give up on it at once.
    await using w = await workerFor(h, handler, { shutdownGraceMs: 50, flushTimeoutMs: 50 });
    // Every post is refused with a 5xx: the progress update is retried, with back-off, for ever.
    h.injectFault("job-done", { status: 503 }, 500);
    const id = h.enqueue("local", { input: {} });
    await waitFor("the progress post to be retried", () => h.requests({ route: "job-done" }).length >= 2);
    h.stopJob(id);
    // Discarded: the job leaves the worker although its post never got through.
    await waitFor("the stopped job to leave the worker", () => w.jobIds.length === 0, 5_000);
    const postsOf = () => h.requests({ route: "job-done" }).filter((r) => r.path.endsWith(`/${id}`)).length;
    const posts = postsOf();
    expect(h.job(id)!.status).toBe("CANCELLED");
    // The slot serves again: the next job is taken (its posts are still refused, so it stays running).
    const next = h.enqueue("local", { input: "next" });
    await waitFor("the next job to be taken", () => w.jobIds.includes(next));
    await waitFor("a post of the next job", () =>
      h.requests({ route: "job-done" }).some((r) => r.path.endsWith(`/${next}`)),
    );
    expect(postsOf()).toBe(posts);
  });
});
