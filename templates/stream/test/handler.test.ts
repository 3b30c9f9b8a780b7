import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";

describe("handler", () => {
  it("streams the tokens in order while the job runs", async () => {
    await using h = await createHarness({ handler });
    const { id } = await h.endpoint.run({ input: { prompt: "one two three" } });
    const tokens: unknown[] = [];
    for await (const token of h.endpoint.stream(id)) tokens.push(token);
    expect(tokens.join("")).toBe("You said: one two three");
    expect(tokens).toHaveLength(5);
    const job = await h.endpoint.status(id);
    expect(job.status).toBe("COMPLETED");
  });

  it("stops after maxTokens", async () => {
    await using h = await createHarness({ handler });
    const { id } = await h.endpoint.run({ input: { prompt: "a b c d e f", maxTokens: 3 } });
    const tokens: unknown[] = [];
    for await (const token of h.endpoint.stream(id)) tokens.push(token);
    expect(tokens).toEqual(["You", " said:", " a"]);
  });

  it("fails the job when the prompt is empty", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { prompt: "" } });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("prompt");
  });
});
