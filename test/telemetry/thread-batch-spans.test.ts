import { trace } from "@opentelemetry/api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineBatchHandler } from "../../src/index.js";
import { type ReceivedSpan, type Receiver, startReceiver } from "../support/otlp-receiver.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * The handler's own spans (the standard API) and ctx.log's trace ids where the handler does not
 * run inside the job's call: in an isolation thread (the spans are recorded there and exported by
 * the main thread) and in a batch handler (the batch's span is the active context). A real
 * OTLP/HTTP receiver on loopback; the thread cases run `runlet start` (dist/: run
 * `node scripts/build.mjs` first) and read its log lines.
 */

let receiver: Receiver;
beforeEach(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await receiver.close();
});

// RUNPOD_ENDPOINT_ID: the platform's JSON log lines, which the tests read.
const otelEnv = () => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_SERVICE_NAME: "otel-threads",
  RUNPOD_ENDPOINT_ID: "local",
});

function one(name: string, where: (s: ReceivedSpan) => boolean = () => true): ReceivedSpan {
  const found = receiver.spans.filter((s) => s.name === name && where(s));
  if (found.length !== 1)
    throw new Error(`${found.length} spans "${name}": ${receiver.spans.map((s) => s.name)}`);
  return found[0] as ReceivedSpan;
}

const jobSpan = (id: string) => one("runlet.job", (s) => s.attributes["runlet.job.id"] === id);
const childOf = (parent: ReceivedSpan, name: string) =>
  one(name, (s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

/** The JSON log lines a child printed. */
function logLines(output: string): Record<string, unknown>[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("the handler's spans and log lines in isolation threads and batches", () => {
  it("parents a thread handler's spans under its handler span, exports them, and puts the span's ids on ctx.log lines", async () => {
    await using h = await testHarness();
    const c = startRunletChild(h, "test/fixtures/otel-thread.ts", {
      podId: "pod-otel-thread",
      env: otelEnv(),
    });
    try {
      const id = h.enqueue("local", { input: { n: 2 } });
      const job = await h.waitForJob(id, { timeoutMs: 30_000 });
      expect(job.status, c.output()).toBe("COMPLETED");
      c.child.kill("SIGTERM");
      expect(await c.exited).toEqual({ code: 0, signal: null });

      const root = jobSpan(id);
      const handler = childOf(root, "runlet.handler");
      const outer = childOf(handler, "user.outer");
      const inner = childOf(outer, "user.inner");
      expect(outer.traceId).toBe(root.traceId);
      // Exported by the main thread, with the worker's resource.
      expect(inner.resource["service.name"]).toBe("otel-threads");
      expect(inner.resource["service.instance.id"]).toBe(root.attributes["runlet.worker.id"]);
      const line = logLines(c.output()).find((l) => l["message"] === "inside the thread");
      expect(line, c.output()).toMatchObject({
        n: 2,
        requestId: id,
        trace_id: root.traceId,
        span_id: handler.spanId,
        trace_flags: "01",
      });
    } finally {
      await stopRunletChild(c);
    }
  }, 60_000);

  it("runs a thread's batch handler under the batch's span, linked to each job's, with each job's ids on its log lines", async () => {
    await using h = await testHarness();
    // Both queued before the worker starts: one take hands them out, and they make one batch.
    const ids = [1, 2].map((n) => h.enqueue("local", { input: { n } }));
    const c = startRunletChild(h, "test/fixtures/otel-batch-thread.ts", {
      podId: "pod-otel-batch-thread",
      env: otelEnv(),
    });
    try {
      for (const id of ids)
        expect((await h.waitForJob(id, { timeoutMs: 30_000 })).status, c.output()).toBe("COMPLETED");
      c.child.kill("SIGTERM");
      expect(await c.exited).toEqual({ code: 0, signal: null });

      const batch = one("runlet.batch.handler");
      expect(batch.parentSpanId).toBeUndefined();
      expect(batch.attributes["runlet.batch.size"]).toBe(2);
      const user = childOf(batch, "user.batch");
      expect(user.traceId).toBe(batch.traceId);
      const lines = logLines(c.output());
      expect(lines.find((l) => l["message"] === "the batch in the thread")).toMatchObject({
        trace_id: batch.traceId,
        span_id: batch.spanId,
      });
      const jobLines = lines.filter((l) => l["message"] === "a job of the batch in the thread");
      expect(jobLines).toHaveLength(2);
      for (const id of ids) {
        const root = jobSpan(id);
        const own = childOf(root, "runlet.batch");
        expect(own.attributes["runlet.batch.id"]).toBe(batch.attributes["runlet.batch.id"]);
        expect(jobLines.find((l) => l["requestId"] === id)).toMatchObject({
          trace_id: root.traceId,
          span_id: own.spanId,
        });
      }
      expect(batch.links.map((l) => l.spanId).sort()).toEqual(ids.map((id) => jobSpan(id).spanId).sort());
    } finally {
      await stopRunletChild(c);
    }
  }, 60_000);

  it("runs an in-process batch handler under the batch's span, and each job's log lines carry its own span's ids", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const handler = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 3, maxWaitMs: 2_000 },
      handler: async ({ inputs, jobs, log }) => {
        const tracer = trace.getTracer("user");
        await tracer.startActiveSpan("user.batch", async (span) => {
          tracer.startSpan("user.step").end();
          span.end();
        });
        log.info("the batch");
        for (const job of jobs) job.log.info("a job of the batch");
        return inputs.map((i) => i.n + 1);
      },
    });
    const ids = [1, 2, 3].map((n) => h.enqueue("local", { input: { n } }));
    const worker = await workerFor(h, handler, { env: { ...h.workerEnv("local"), ...otelEnv() }, sink });
    for (const id of ids) await waitFor(`job ${id}`, () => h.job(id)?.status === "COMPLETED");
    await worker.close();

    const batch = one("runlet.batch.handler");
    const user = childOf(batch, "user.batch");
    childOf(user, "user.step");
    expect(batch.links.map((l) => l.spanId).sort()).toEqual(ids.map((id) => jobSpan(id).spanId).sort());
    expect(sink.lines.find((l) => l["message"] === "the batch")).toMatchObject({
      trace_id: batch.traceId,
      span_id: batch.spanId,
    });
    for (const id of ids) {
      const root = jobSpan(id);
      const own = childOf(root, "runlet.batch");
      expect(own.links.map((l) => l.spanId)).toEqual([batch.spanId]);
      expect(
        sink.lines.find((l) => l["message"] === "a job of the batch" && l["requestId"] === id),
      ).toMatchObject({ trace_id: root.traceId, span_id: own.spanId });
    }
  });
});
