import { describe, expect, it } from "vitest";
import handler from "../../examples/token-stream/handler.js";
import { createHarness } from "../../src/testing/index.js";

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
    await using h = await createHarness({ handler });
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
    const streamed = h.harness.job(id)?.stream.length ?? 0;
    expect(streamed).toBeLessThan(201);
  });
});
