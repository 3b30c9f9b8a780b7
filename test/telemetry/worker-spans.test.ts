import { context, trace } from "@opentelemetry/api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createClient } from "../../src/client/index.js";
import { defineBatchHandler, defineHandler, JobError } from "../../src/index.js";
import { type ReceivedSpan, type Receiver, startReceiver } from "../support/otlp-receiver.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * The worker's spans and metrics as a collector gets them: a real OTLP/HTTP receiver on loopback,
 * the official exporters posting to it (docs/observability.md).
 */

let receiver: Receiver;
beforeEach(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await receiver.close();
});

const otelEnv = () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "otel-test" });

/** The order of a job's steps, for children that start in the same millisecond. */
const ORDER = [
  "runlet.validate",
  "runlet.handler",
  "runlet.batch",
  "runlet.stream",
  "runlet.offload",
  "runlet.result",
];

/** The job's span tree: the names of the job span's children, sorted by start, then by name. */
function tree(jobId: string): { job: ReceivedSpan; children: ReceivedSpan[] } {
  const job = receiver.spans.find((s) => s.name === "runlet.job" && s.attributes["runlet.job.id"] === jobId);
  if (job === undefined) throw new Error(`no span for job ${jobId}: ${receiver.spans.map((s) => s.name)}`);
  const children = receiver.spans
    .filter((s) => s.parentSpanId === job.spanId)
    .sort((a, b) => a.start - b.start || ORDER.indexOf(a.name) - ORDER.indexOf(b.name));
  return { job, children };
}

const names = (spans: ReceivedSpan[]) => spans.map((s) => s.name);

describe("worker telemetry over OTLP/HTTP", () => {
  it("exports a plain job's span tree with its attributes, ctx.log's trace ids, a user span, and metrics", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const handler = defineHandler({
      input: z.object({ n: z.number() }),
      handler: async ({ input, log }) => {
        log.info("inside");
        const span = trace.getTracer("user").startSpan("user.work");
        span.end();
        return { doubled: input.n * 2 };
      },
    });
    const worker = await workerFor(h, handler, {
      env: { ...h.workerEnv("local"), RUNPOD_ENDPOINT_ID: "local", ...otelEnv() },
      sink,
    });
    const id = h.enqueue("local", { input: { n: 2 } });
    await waitFor("the job to complete", () => h.job(id)?.status === "COMPLETED");
    await worker.close();

    const { job, children } = tree(id);
    expect(job.attributes).toMatchObject({
      "runlet.job.id": id,
      "runlet.worker.id": worker.id,
      "runlet.endpoint.id": "local",
      "runlet.job.attempt": 1,
      "runlet.job.outcome": "completed",
    });
    expect(job.resource["service.name"]).toBe("otel-test");
    expect(job.parentSpanId).toBeUndefined();
    expect(names(children)).toEqual(["runlet.validate", "runlet.handler", "runlet.result"]);
    const handlerSpan = children[1] as ReceivedSpan;
    const user = receiver.spans.find((s) => s.name === "user.work");
    expect(user?.parentSpanId).toBe(handlerSpan.spanId);
    expect(user?.traceId).toBe(job.traceId);
    expect(children[2]?.attributes["runlet.result.delivery"]).toBe("delivered");
    const inside = sink.lines.find((l) => l["message"] === "inside");
    expect(inside).toMatchObject({ trace_id: job.traceId, span_id: handlerSpan.spanId });
    expect(receiver.spans.some((s) => s.name === "runlet.worker.start")).toBe(true);

    const metricNames = new Set(receiver.metrics.map((m) => m.name));
    for (const name of ["runlet.jobs", "runlet.job.duration", "runlet.jobs.in_flight", "runlet.slots.free"]) {
      expect(metricNames, name).toContain(name);
    }
    const jobs = receiver.metrics.find((m) => m.name === "runlet.jobs");
    expect(jobs?.points).toEqual([{ attributes: { "runlet.job.outcome": "completed" }, value: 1 }]);
  });

  it("exports a streaming job's stream span with its chunk count and bytes, not a span per chunk", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({
      input: z.object({}),
      async *handler() {
        yield "a";
        yield "bb";
        yield "ccc";
      },
    });
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() } });
    const id = h.enqueue("local", { input: {} });
    await waitFor("the job to complete", () => h.job(id)?.status === "COMPLETED");
    await worker.close();

    const { job, children } = tree(id);
    expect(job.attributes["runlet.job.outcome"]).toBe("completed");
    // The result's post waits behind the chunks in the job's outbox: the two spans overlap.
    expect(names(children).slice(0, 2)).toEqual(["runlet.validate", "runlet.handler"]);
    expect(names(children).slice(2).sort()).toEqual(["runlet.result", "runlet.stream"]);
    const stream = children.find((s) => s.name === "runlet.stream");
    expect(stream?.attributes["runlet.stream.chunks"]).toBe(3);
    // The chunk bodies as posted, byte for byte (the harness's record of each post's body).
    const posted = h.requests({ route: "job-stream" }).reduce((n, r) => n + Buffer.byteLength(r.body), 0);
    expect(posted).toBeGreaterThan(0);
    expect(stream?.attributes["runlet.stream.bytes"]).toBe(posted);
    const bytes = receiver.metrics.find((m) => m.name === "runlet.stream.bytes");
    expect(bytes?.points[0]?.value).toBe(stream?.attributes["runlet.stream.bytes"]);
  });

  it("marks a failing job and its handler span as errors with the error code, and records the result post's retries as events", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({
      input: z.object({}),
      handler: () => {
        throw new JobError("bad luck");
      },
    });
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() } });
    h.injectFault("job-done", { status: 503 }, 2);
    const id = h.enqueue("local", { input: {} });
    await waitFor("the job to fail", () => h.job(id)?.status === "FAILED");
    await worker.close();

    const { job, children } = tree(id);
    expect(job.attributes).toMatchObject({
      "runlet.job.outcome": "failed",
      "runlet.job.error_code": "RUNLET_JOB_FAILED",
    });
    expect(job.status.code).toBe(2);
    expect(names(children)).toEqual(["runlet.validate", "runlet.handler", "runlet.result"]);
    expect(children[1]?.status).toMatchObject({ code: 2, message: "bad luck" });
    const result = children[2] as ReceivedSpan;
    expect(
      result.events.map((e) => [
        e.name,
        e.attributes["runlet.post.attempt"],
        e.attributes["http.response.status_code"],
      ]),
    ).toEqual([
      ["retry", 0, 503],
      ["retry", 1, 503],
    ]);
    expect(result.attributes["runlet.result.delivery"]).toBe("delivered");
    const retries = receiver.metrics.find((m) => m.name === "runlet.post.retries");
    expect(retries?.points).toEqual([{ attributes: { "runlet.post.what": "result" }, value: 2 }]);
  });

  it("marks a job the platform cancelled as stopped, with no result span", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({
      input: z.object({}),
      handler: ({ signal }) =>
        new Promise((resolve) => signal.addEventListener("abort", () => resolve("late"), { once: true })),
    });
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() } });
    const id = h.enqueue("local", { input: {} });
    await waitFor("the worker to hold the job", () => worker.jobIds.includes(id));
    h.stopJob(id);
    await waitFor("the worker to let it go", () => !worker.jobIds.includes(id));
    await worker.close();

    const { job, children } = tree(id);
    expect(job.attributes["runlet.job.outcome"]).toBe("stopped");
    expect(names(children)).toEqual(["runlet.validate", "runlet.handler"]);
    expect(children[1]?.attributes["runlet.job.stopped"]).toBe(true);
    const jobs = receiver.metrics.find((m) => m.name === "runlet.jobs");
    expect(jobs?.points).toEqual([{ attributes: { "runlet.job.outcome": "stopped" }, value: 1 }]);
  });

  it("gives each job of a batch a batch span naming the batch and its size", async () => {
    await using h = memoryHarness();
    const handler = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 3, maxWaitMs: 2_000 },
      handler: ({ inputs }) => inputs.map((i) => i.n + 1),
    });
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() } });
    for (const id of ids) await waitFor(`job ${id}`, () => h.job(id)?.status === "COMPLETED");
    await worker.close();

    const batchIds = new Set<unknown>();
    for (const id of ids) {
      const { job, children } = tree(id);
      expect(job.attributes["runlet.job.outcome"]).toBe("completed");
      expect(names(children)).toContain("runlet.batch");
      expect(names(children)).toContain("runlet.result");
      const batch = children.find((s) => s.name === "runlet.batch") as ReceivedSpan;
      expect(batch.attributes["runlet.batch.size"]).toBe(3);
      batchIds.add(batch.attributes["runlet.batch.id"]);
    }
    expect(batchIds.size).toBe(1);
  });

  it("makes the job's span a child of the client's: the active span's, or a traceContext given", async () => {
    // Stays on loopback: the job API client's own HTTP request carries the trace context here.
    await using h = await testHarness();
    const handler = defineHandler({ input: z.object({}), handler: () => "ok" });
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() } });
    const ep = createClient({ apiKey: h.apiKey, baseUrl: `${h.url}/v2` }).endpoint("local");
    // The worker registered the global API; the client reads the active span through it.
    const client = trace.getTracer("client").startSpan("client.call");
    const ctx = trace.setSpan(context.active(), client);
    const { id } = await context.with(ctx, () => ep.run({ input: {} }));
    client.end();
    const given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const { id: id2 } = await ep.run({ input: {}, traceContext: { traceparent: given } });
    for (const j of [id, id2]) await waitFor(`job ${j}`, () => h.job(j)?.status === "COMPLETED");
    await worker.close();

    const first = tree(id).job;
    expect(first.traceId).toBe(client.spanContext().traceId);
    expect(first.parentSpanId).toBe(client.spanContext().spanId);
    expect(typeof first.attributes["runlet.job.delay_ms"]).toBe("number");
    const second = tree(id2).job;
    expect(second.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(second.parentSpanId).toBe("b7ad6b7169203331");
  });
});
