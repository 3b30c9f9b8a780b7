import { describe, expect, it } from "vitest";
import handler from "../../examples/echo/handler.js";
import { createHarness } from "../../src/testing/index.js";

describe("examples/echo", () => {
  it("echoes the text, upper-cased on request, after one progress update", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { text: "hi there", upper: true } });
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ echo: "HI THERE" });
    expect(h.harness.job(job.id)?.progress).toEqual([{ received: 8 }]);
  });

  it("says hello when given no text", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: {} });
    expect(job.output).toEqual({ echo: "hello" });
  });

  it("fails the job when text is not a string", async () => {
    await using h = await createHarness({ handler });
    // @ts-expect-error the endpoint's input type comes from the handler's schema; 42 is wrong on purpose
    const job = await h.endpoint.runsync({ input: { text: 42 } });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("text");
  });
});
