import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";

// With a store configured (BUCKET_ENDPOINT_URL and its keys in the environment, or s3Config in
// the job) the handler uploads; without one it fails the job with a message saying what to set.
describe("handler", () => {
  it("fails the job with what to configure when there is no S3 store", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { text: "hello" } });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("no S3 store");
  });

  it("rejects empty text before touching the store", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { text: "" } });
    expect(job.status).toBe("FAILED");
    expect(job.error).toContain("text");
  });
});
