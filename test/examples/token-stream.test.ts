import { describe, expect, it } from "vitest";
import handler from "../../examples/token-stream/handler.js";
import { defineHandler } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";
import { waitFor } from "../support/workers.js";

describe("examples/token-stream", () => {
  it("streams one item per token, in order, with running token counts in the chunk metrics", async () => {
    await using h = await createHarness({ handler });
    const { id } = await h.endpoint.run({ input: { prompt: "a b c", tokenDelayMs: 0 } });
    const chunks = [];
    for await (const chunk of h.endpoint.streamChunks(id)) chunks.push(chunk);
    expect(chunks.map((c) => c.output)).toEqual(["You", " said:", " a", " b", " c"]);
    expect(chunks.map((c) => c.metrics?.["tokens"])).toEqual([1, 2, 3, 4, 5]);
    expect(chunks.map((c) => c.metrics?.["streamIndex"])).toEqual([0, 1, 2, 3, 4]);
    const ttft = chunks.map((c) => c.metrics?.["timeToFirstTokenMs"]);
    expect(typeof ttft[0]).toBe("number");
    expect(new Set(ttft).size).toBe(1);
    const job = await h.endpoint.status(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual([]);
  });

  it("stops at maxTokens", async () => {
    await using h = await createHarness({ handler });
    const { id } = await h.endpoint.run({
      input: { prompt: "one two three four", maxTokens: 2, tokenDelayMs: 0 },
    });
    const tokens: unknown[] = [];
    for await (const token of h.endpoint.stream(id)) tokens.push(token);
    expect(tokens).toEqual(["You", " said:"]);
  });

  it("stops generating when the job is cancelled", async () => {
    // The example's handler, unchanged, with a note of when its generator ended: the test waits for
    // that event instead of watching a window of real time for posts that should not come.
    let ended!: () => void;
    const generatorEnded = new Promise<void>((resolve) => {
      ended = resolve;
    });
    const watched = defineHandler({
      input: handler.input,
      concurrency: handler.concurrency,
      async *handler(ctx) {
        try {
          yield* handler.handler(ctx) as AsyncGenerator<unknown>;
        } finally {
          ended();
        }
      },
    });
    await using h = await createHarness({ handler: watched });
    const { id } = await h.endpoint.run({
      input: {
        prompt: Array.from({ length: 200 }, (_, i) => `w${i}`).join(" "),
        maxTokens: 4096,
        tokenDelayMs: 50,
      },
    });
    const seen: unknown[] = [];
    for await (const token of h.endpoint.stream(id)) {
      seen.push(token);
      if (seen.length === 2) break;
    }
    await h.endpoint.cancel(id);
    const job = await h.endpoint.status(id);
    expect(job.status).toBe("CANCELLED");
    // The worker learns of the cancel from its job-stop poll; wait until one delivered it.
    const posts = () => h.harness.requests({ route: "job-stream" }).filter((r) => r.path.endsWith(`/${id}`));
    await waitFor("the job-stop that carries the cancel", () =>
      h.harness.requests({ route: "job-stop" }).some((r) => r.status === 200),
    );
    const atStop = posts().length;
    // The stop reached the handler's signal and ended generation: nothing more can be yielded.
    // Without the stop it would go on to all 202 tokens (and end only then, ten seconds on).
    await generatorEnded;
    expect(posts().length - atStop).toBeLessThanOrEqual(1);
    expect(posts().length).toBeLessThan(10);
  });
});
