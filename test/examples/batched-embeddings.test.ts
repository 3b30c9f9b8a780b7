import { describe, expect, it, vi } from "vitest";
import {
  callMs,
  DEFAULT_COST,
  idealJobsPerSecond,
  SimulatedDevice,
} from "../../examples/batched-embeddings/device.js";
import handler, { MAX_WORDS } from "../../examples/batched-embeddings/handler.js";
import { startWorker } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";

describe("examples/batched-embeddings", () => {
  it("embeds queued jobs in one device call, each job with its own vector, and fails an over-long text alone", async () => {
    // No worker yet: the jobs queue first, so the worker's first take finds all of them.
    await using h = await createHarness({ endpoints: [{ id: "local", handler, workers: 0 }] });
    const texts = ["a cat", "a dog", "word ".repeat(MAX_WORDS + 1), "a cat"];
    const ids = texts.map((text) => h.harness.enqueue("local", { input: { text } }));
    // The device is made in setup (ctx.state); a spy on its class watches its calls and lets them run.
    const embed = vi.spyOn(SimulatedDevice.prototype, "embed");
    await using worker = await startWorker(handler, { env: h.harness.workerEnv("local") });
    const ready = new Promise<Readonly<Record<string, number>>>((resolve) =>
      worker.on("ready", ({ phases }) => resolve(phases)),
    );
    const jobs = await Promise.all(ids.map((id) => h.harness.waitForJob(id)));
    expect(jobs.map((j) => j.status)).toEqual(["COMPLETED", "COMPLETED", "FAILED", "COMPLETED"]);
    expect(jobs[2]!.error).toBe(`text has ${MAX_WORDS + 1} words, over the ${MAX_WORDS}-word limit`);
    const [cat, dog, , catAgain] = jobs.map(
      (j) => j.output as { vector: number[]; words: number } | undefined,
    );
    expect(cat!.vector).toHaveLength(8);
    expect(cat).toEqual(catAgain);
    expect(cat!.vector).not.toEqual(dog!.vector);
    // One batch of four; the device was called once, for the three texts within the limit.
    expect(embed.mock.calls.map(([texts]) => texts.length)).toEqual([3]);
    embed.mockRestore();
    // The device was made in setup, a start-up phase before the first take.
    expect(Object.keys(await ready)).toContain("setup");
    const sizes = h.harness.requests({ route: "job-done" }).map((r) => r.query["batch_size"]);
    expect(sizes).toEqual(["4", "4", "4", "4"]);
  });

  it("types the endpoint from the handler, and states the cost model the bench compares with", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { text: "hello there", dims: 4 } });
    expect(job.output?.vector).toHaveLength(4);
    expect(job.output?.words).toBe(2);
    expect(callMs(DEFAULT_COST, 32)).toBeCloseTo(26.4);
    expect(idealJobsPerSecond(DEFAULT_COST, 1)).toBeCloseTo(49.5, 1);
    expect(idealJobsPerSecond(DEFAULT_COST, 32)).toBeCloseTo(1212.1, 1);
  });
});
