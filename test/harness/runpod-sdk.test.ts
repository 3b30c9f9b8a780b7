import runpodSdk from "runpod-sdk";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";

/** Aggregates its stream into the output. "echo" yields its text, "stream" yields its letters, "hold" waits until the job is stopped. */
const handler = defineHandler({
  returnAggregateStream: true,
  input: z.object({ mode: z.enum(["echo", "stream", "hold"]), text: z.string().default("") }),
  async *handler({ input, signal }) {
    if (input.mode === "hold") {
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      return;
    }
    if (input.mode === "stream") {
      for (const letter of input.text) yield letter;
      return;
    }
    yield { text: input.text };
  },
});

describe("the official JS client (runpod-sdk) against the harness and a real runlet worker", () => {
  it("runs runSync, run, status, stream, cancel, health and purgeQueue with correct results", async () => {
    await using h = await createHarness({ endpoints: [{ id: "sdk", handler }], streamHoldMs: 100 });
    const ep = runpodSdk(h.apiKey, { baseUrl: `${h.url}/v2` }).endpoint("sdk");
    if (ep === null) throw new Error("no endpoint");

    const sync = await ep.runSync({ input: { mode: "echo", text: "hello" } }, 20_000);
    expect(sync).toMatchObject({ status: "COMPLETED", started: true, completed: true, succeeded: true });
    expect((sync as { output: unknown }).output).toEqual([{ text: "hello" }]);

    const queued = await ep.run({ input: { mode: "stream", text: "abc" } });
    expect(queued).toEqual({ id: expect.stringMatching(/-e1$/), status: "IN_QUEUE" });
    const chunks: unknown[] = [];
    for await (const chunk of ep.stream(queued.id)) chunks.push((chunk as { output: unknown }).output);
    expect(chunks).toEqual(["a", "b", "c"]);
    expect(await ep.status(queued.id)).toMatchObject({ id: queued.id, status: "COMPLETED", completed: true });

    // The one worker (concurrency 1) is held by the first job, so the next two wait in the queue.
    const held = await ep.run({ input: { mode: "hold" } });
    await expect.poll(async () => (await ep.status(held.id)).status).toBe("IN_PROGRESS");
    await ep.run({ input: { mode: "echo" } });
    await ep.run({ input: { mode: "echo" } });
    const health = await ep.health();
    expect(health).toEqual({
      jobs: { completed: 2, failed: 0, inProgress: 1, inQueue: 2, retried: 0 },
      workers: { idle: 0, running: 1, initializing: 0, ready: 0, throttled: 0, unhealthy: 0 },
    });
    expect(await ep.purgeQueue()).toEqual({ removed: 2, status: "completed" });
    expect(await ep.cancel(held.id)).toEqual({ id: held.id, status: "CANCELLED" });
    const stopped = await h.harness.waitForJob(held.id);
    expect(stopped.status).toBe("CANCELLED");
    await expect.poll(() => h.harness.health("sdk").jobs.inProgress).toBe(0);
    expect((await ep.health()).jobs).toEqual({
      completed: 2,
      failed: 0,
      inProgress: 0,
      inQueue: 0,
      retried: 0,
    });
  });
});
