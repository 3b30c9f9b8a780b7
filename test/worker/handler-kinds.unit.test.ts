import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler, JobError } from "../../src/index.js";
import { memoryHarness, workerFor } from "../support/workers.js";

describe("handler kinds against the harness", () => {
  it("completes a sync handler's job with its output", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        input: z.object({ n: z.number() }),
        handler: ({ input }) => ({ double: input.n * 2 }),
      }),
    );
    const id = h.enqueue("local", { input: { n: 21 } });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ double: 42 });
    expect(job.isStream).toBe(false);
    expect(job.duplicateResults).toBe(0);
  });

  it("completes an async handler's job and posts its progress first, in order", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        handler: async ({ progress }) => {
          progress({ step: 1 });
          await new Promise((r) => setTimeout(r, 5));
          progress("two");
          return "done";
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.progress).toEqual([{ step: 1 }, "two"]);
    expect(job.output).toBe("done");
  });

  it("streams a generator's items in order and ends with isStream=true and an empty output", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        *handler() {
          yield "a";
          yield { b: 2 };
          yield 3;
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.isStream).toBe(true);
    expect(job.output).toEqual([]);
    expect(job.stream.map((c) => c.output)).toEqual(["a", { b: 2 }, 3]);
    expect(job.stream.map((c) => c.metrics?.["streamIndex"])).toEqual([0, 1, 2]);
    const streamPosts = h.requests({ route: "job-stream" });
    expect(streamPosts.map((r) => r.query["isStream"])).toEqual(["false", "false", "false"]);
    expect(JSON.parse(streamPosts[0]!.body)).toEqual({
      output: "a",
      metrics: { streamIndex: 0, part: 0, parts: 1, encoding: "json", bytes: 3 },
    });
  });

  it("returns every item of an async generator when returnAggregateStream is set, with handler metrics on chunks", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        returnAggregateStream: true,
        async *handler({ metrics }) {
          for (const token of ["x", "y"]) {
            metrics.increment("tokens");
            await new Promise((r) => setTimeout(r, 1));
            yield token;
          }
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.output).toEqual(["x", "y"]);
    expect(job.isStream).toBe(true);
    expect(job.stream.map((c) => c.metrics?.["tokens"])).toEqual([1, 2]);
  });

  it("aggregates yielded bytes as base64 strings, as their chunks carry them", async () => {
    await using h = memoryHarness();
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    await using _w = await workerFor(
      h,
      defineHandler({
        returnAggregateStream: true,
        *handler() {
          yield "text";
          yield bytes;
          yield new Uint8Array(bytes.buffer, bytes.byteOffset + 1, 2);
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    await h.waitForJob(id);
    const final = h.requests({ route: "job-done" }).at(-1)!;
    expect(final.query["isStream"]).toBe("true");
    expect(final.body).toBe('{"output":["text","AAEC+v8=","AQI="]}');
    const chunks = h.job(id)!.stream;
    expect(chunks.map((c) => [c.output, c.metrics?.["encoding"]])).toEqual([
      ["text", "json"],
      ["AAEC+v8=", "base64"],
      ["AQI=", "base64"],
    ]);
  });

  it("posts {output: null} for a handler that returns nothing", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, defineHandler({ handler: () => undefined }));
    const id = h.enqueue("local", { input: {} });
    await h.waitForJob(id);
    const done = h.requests({ route: "job-done" });
    expect(done.map((r) => r.body)).toEqual(['{"output":null}']);
  });

  it("fails the job with the message of a returned { error }", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, defineHandler({ handler: () => ({ error: "no such model" }) }));
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe("no such model");
    expect(job.stopPod).toBe(false);
  });

  it("fails the job with a JobError's message and asks for a new worker when refreshWorker is set", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        handler: () => {
          throw new JobError("GPU is wedged", { refreshWorker: true });
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe("GPU is wedged");
    expect(job.stopPod).toBe(true);
    expect(h.requests({ route: "job-done" })[0]!.body).toBe('{"error":"GPU is wedged","stopPod":true}');
  });

  it("fails a job whose input misses the schema, naming every bad field, and goes on", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        input: z.object({ prompt: z.string(), steps: z.number().int().max(50) }),
        handler: ({ input }) => input.prompt,
      }),
    );
    const bad = h.enqueue("local", { input: { steps: 99 } });
    const failed = await h.waitForJob(bad);
    expect(failed.status).toBe("FAILED");
    expect(failed.error).toBe(
      [
        "input is invalid:",
        "✖ Invalid input: expected string, received undefined",
        "  → at prompt",
        "✖ Too big: expected number to be <=50",
        "  → at steps",
      ].join("\n"),
    );
    const good = h.enqueue("local", { input: { prompt: "hi", steps: 3 } });
    expect((await h.waitForJob(good)).output).toBe("hi");
  });

  it("reports a thrown Error as the platform's JSON error report", async () => {
    await using h = memoryHarness();
    await using w = await workerFor(
      h,
      defineHandler({
        handler: () => {
          throw new TypeError("bad thing");
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    const report = JSON.parse(job.error!) as Record<string, string>;
    expect(Object.keys(report)).toEqual([
      "error_type",
      "error_message",
      "error_traceback",
      "hostname",
      "worker_id",
      "runpod_version",
    ]);
    expect(report["error_type"]).toBe("TypeError");
    expect(report["error_message"]).toBe("bad thing");
    expect(report["error_traceback"]).toContain("TypeError: bad thing");
    expect(report["hostname"]).toBe(w.id); // the harness sets RUNPOD_POD_HOSTNAME to the pod id
    expect(report["worker_id"]).toBe(w.id);
    expect(report["runpod_version"]).toMatch(/^runlet\/\d+\.\d+\.\d+/);
  });

  it("reports thrown non-Error values (a string, null) without crashing the worker", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(
      h,
      defineHandler({
        input: z.object({ what: z.enum(["string", "null"]) }),
        handler: ({ input }) => {
          throw input.what === "string" ? "plain text" : null;
        },
      }),
    );
    const a = await h.waitForJob(h.enqueue("local", { input: { what: "string" } }));
    const b = await h.waitForJob(h.enqueue("local", { input: { what: "null" } }));
    expect(JSON.parse(a.error!)).toMatchObject({ error_type: "string", error_message: "plain text" });
    expect(JSON.parse(b.error!)).toMatchObject({ error_type: "null", error_message: "null" });
  });

  it("fails a job whose output JSON cannot represent", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, defineHandler({ handler: () => ({ n: 10n }) }));
    const job = await h.waitForJob(h.enqueue("local", { input: {} }));
    expect(job.status).toBe("FAILED");
    expect(job.error).toMatch(/^the output cannot be serialised to JSON: /);
  });
});
