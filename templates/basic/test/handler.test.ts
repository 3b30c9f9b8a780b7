import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";

// Each test runs the handler the way the platform does: a local copy of the platform, a worker
// taking jobs from it, and a client sending them over HTTP.
describe("handler", () => {
  it("greets by name", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { name: "Ada" } });
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ message: "Hello, Ada!" });
  });

  it("uses the greeting it is given", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { name: "Grace", greeting: "Welcome" } });
    expect(job.output).toEqual({ message: "Welcome, Grace!" });
  });

  it("fails the job, naming the field, when the name is missing", async () => {
    await using h = await createHarness({ handler });
    // @ts-expect-error the endpoint is typed from the handler's schema; a missing name is the point here
    const job = await h.endpoint.runsync({ input: {} });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("name");
  });
});
