import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

const echo = defineHandler({ concurrency: 2, handler: ({ input }) => ({ echo: input }) });

describe("faults between the worker and the platform", () => {
  it("keeps taking after 429, 5xx and dropped connections on job-take, and runs every job once", async () => {
    await using h = memoryHarness();
    h.injectFault("job-take-batch", { status: 503 }, 2);
    h.injectFault("job-take-batch", { drop: true }, 1);
    h.injectFault("job-take-batch", { status: 429, retryAfterSec: 0 }, 1);
    const ids = [1, 2, 3, 4].map((n) => h.enqueue("local", { input: n }));
    await using _w = await workerFor(h, echo);
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => j.output)).toEqual([1, 2, 3, 4].map((n) => ({ echo: n })));
    expect(jobs.every((j) => j.status === "COMPLETED" && j.duplicateResults === 0)).toBe(true);
    const statuses = h
      .requests({ route: "job-take-batch" })
      .slice(0, 4)
      .map((r) => r.status);
    expect(statuses).toEqual([503, 503, "dropped", 429]);
  });

  it("retries job-done through 5xx, 429 and dropped connections and delivers each result exactly once", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    await using _w = await workerFor(h, echo, { sink });
    h.injectFault("job-done", { status: 500 }, 1);
    h.injectFault("job-done", { drop: true }, 1);
    h.injectFault("job-done", { status: 429, retryAfterSec: 0 }, 1);
    h.injectFault("job-done", { status: 502 }, 1);
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: n }));
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => j.output)).toEqual([{ echo: 1 }, { echo: 2 }, { echo: 3 }]);
    expect(jobs.map((j) => j.duplicateResults)).toEqual([0, 0, 0]);
    const done = h.requests({ route: "job-done" });
    expect(done.filter((r) => r.status === 200).length).toBe(3);
    expect(
      done
        .map((r) => r.status)
        .slice(0, 4)
        .sort(),
    ).toEqual([429, 500, 502, "dropped"].sort());
    expect(sink.lines.some((l) => String(l["message"]).includes("retrying"))).toBe(true);
  });

  it("posts one short { error } saying why when the platform rejects a final result with a 4xx", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, echo);
    h.injectFault("job-done", { status: 400, body: "payload too large" }, 1);
    const id = h.enqueue("local", { input: "big" });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe("the platform rejected this job's result (25 bytes) with HTTP 400");
    expect(h.requests({ route: "job-done" }).map((r) => r.status)).toEqual([400, 200]);
  });

  it("turns a rejected stream chunk into a final error that names it", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        *handler() {
          yield "a";
          yield "b";
        },
      }),
    );
    h.injectFault("job-stream", { status: 413 }, 1);
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe(
      "the platform rejected stream chunk 1 of this job with HTTP 413; its output is incomplete",
    );
    expect(job.stream.map((c) => c.output)).toEqual(["b"]);
  });

  it("fails an output over maxResultBytes with a message naming the size and limit when no store is configured", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, defineHandler({ handler: () => "x".repeat(200) }), {
      maxResultBytes: 100,
    });
    const job = await h.waitForJob(h.enqueue("local", { input: {} }));
    expect(job.status).toBe("FAILED");
    expect(job.error).toMatch(
      /^the output is 202 bytes, over the 100-byte limit for a result, and no S3 store is configured/,
    );
  });

  it("fails a malformed delivered job that has an id, logs it, and keeps serving", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    // A 200 fault answers the take with this body instead of a queued job.
    h.injectFault("job-take", { status: 200, body: JSON.stringify({ id: "bad-1" }) }, 1);
    await using _w = await workerFor(h, defineHandler({ handler: ({ input }) => input }), { sink });
    await waitFor("the failure post", () =>
      h.requests({ route: "job-done" }).find((r) => r.path.endsWith("/bad-1")),
    );
    const post = h.requests({ route: "job-done" }).find((r) => r.path.endsWith("/bad-1"))!;
    expect(JSON.parse(post.body)).toEqual({
      error: "the platform delivered a malformed job (input: job has no input)",
    });
    expect(sink.lines.some((l) => l["code"] === "RUNLET_PROTOCOL_BAD_JOB" && l["jobId"] === "bad-1")).toBe(
      true,
    );
    const id = h.enqueue("local", { input: 7 });
    expect((await h.waitForJob(id)).output).toBe(7);
  });

  it("never runs more jobs than it asked for: extra jobs in an answer are failed, not run", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const ran: unknown[] = [];
    h.injectFault(
      "job-take",
      {
        status: 200,
        body: JSON.stringify([
          { id: "x-1", input: 1 },
          { id: "x-2", input: 2 },
        ]),
      },
      1,
    );
    await using _w = await workerFor(
      h,
      defineHandler({
        handler: ({ input }) => {
          ran.push(input);
          return input;
        },
      }),
      { sink },
    );
    await waitFor("both posts", () => h.requests({ route: "job-done" }).length >= 2);
    expect(ran).toEqual([1]);
    const extra = h.requests({ route: "job-done" }).find((r) => r.path.endsWith("/x-2"))!;
    expect(JSON.parse(extra.body).error).toBe(
      "the platform delivered more jobs than the 1 this worker asked for; this job was not run (retry it)",
    );
  });
});
