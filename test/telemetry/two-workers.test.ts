import { trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { type ReceivedSpan, type Receiver, startReceiver } from "../support/otlp-receiver.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Two workers in one process share OpenTelemetry's globals (context manager, tracer provider,
 * propagator), which the API lets be set once: each worker's handler spans go to that worker's
 * collector, under its handler span, and the first worker shutting down leaves the second's
 * tracing whole. Two real OTLP/HTTP receivers on loopback.
 */

const userSpanHandler = defineHandler({
  input: z.object({ tag: z.string() }),
  handler: ({ input }) => {
    trace.getTracer("user").startSpan(`user.${input.tag}`).end();
    return input.tag;
  },
});

function handlerSpanOf(receiver: Receiver, jobId: string): ReceivedSpan {
  const job = receiver.spans.find((s) => s.name === "runlet.job" && s.attributes["runlet.job.id"] === jobId);
  const handler = receiver.spans.find((s) => s.name === "runlet.handler" && s.parentSpanId === job?.spanId);
  if (handler === undefined)
    throw new Error(`no handler span for ${jobId}: ${receiver.spans.map((s) => s.name)}`);
  return handler;
}

describe("two workers in one process", () => {
  it("send each handler's spans to their own worker's collector, and the first to stop leaves the second traced", async () => {
    const [ra, rb] = [await startReceiver(), await startReceiver()];
    try {
      await using ha = memoryHarness();
      await using hb = memoryHarness();
      const a = await workerFor(ha, userSpanHandler, {
        env: { ...ha.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: ra.url, OTEL_SERVICE_NAME: "worker-a" },
        sink: logSink(),
      });
      const b = await workerFor(hb, userSpanHandler, {
        env: { ...hb.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: rb.url, OTEL_SERVICE_NAME: "worker-b" },
        sink: logSink(),
      });
      const a1 = ha.enqueue("local", { input: { tag: "a1" } });
      const b1 = hb.enqueue("local", { input: { tag: "b1" } });
      await waitFor(
        "both jobs",
        () => ha.job(a1)?.status === "COMPLETED" && hb.job(b1)?.status === "COMPLETED",
      );
      await a.close();
      // After the first worker's telemetry shut down, the second's handler spans are still made and parented.
      const b2 = hb.enqueue("local", { input: { tag: "b2" } });
      await waitFor("the second worker's next job", () => hb.job(b2)?.status === "COMPLETED");
      await b.close();

      const names = (r: Receiver) => r.spans.filter((s) => s.name.startsWith("user.")).map((s) => s.name);
      expect(names(ra)).toEqual(["user.a1"]);
      expect(names(rb).sort()).toEqual(["user.b1", "user.b2"]);
      for (const [receiver, jobId, tag] of [
        [ra, a1, "a1"],
        [rb, b1, "b1"],
        [rb, b2, "b2"],
      ] as const) {
        const user = receiver.spans.find((s) => s.name === `user.${tag}`);
        const handler = handlerSpanOf(receiver, jobId);
        expect(user?.parentSpanId, tag).toBe(handler.spanId);
        expect(user?.traceId, tag).toBe(handler.traceId);
        expect(user?.resource["service.name"], tag).toBe(receiver === ra ? "worker-a" : "worker-b");
      }
      // Both gone: runlet's globals are released, and a span made now records nothing.
      expect(trace.getTracer("after").startSpan("after").isRecording()).toBe(false);
    } finally {
      await Promise.all([ra.close(), rb.close()]);
    }
  });

  it("keeps a worker with traces off (OTEL_TRACES_EXPORTER=none) out of the other worker's collector", async () => {
    const [ra, rc] = [await startReceiver(), await startReceiver()];
    try {
      await using ha = memoryHarness();
      await using hc = memoryHarness();
      const a = await workerFor(ha, userSpanHandler, {
        env: { ...ha.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: ra.url },
        sink: logSink(),
      });
      const c = await workerFor(hc, userSpanHandler, {
        env: { ...hc.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: rc.url, OTEL_TRACES_EXPORTER: "none" },
        sink: logSink(),
      });
      const a1 = ha.enqueue("local", { input: { tag: "a1" } });
      const c1 = hc.enqueue("local", { input: { tag: "c1" } });
      await waitFor(
        "both jobs",
        () => ha.job(a1)?.status === "COMPLETED" && hc.job(c1)?.status === "COMPLETED",
      );
      await c.close();
      await a.close();
      const jobIds = ra.spans
        .filter((s) => s.name === "runlet.job")
        .map((s) => s.attributes["runlet.job.id"]);
      expect(jobIds).toEqual([a1]);
      // The worker with traces off still exported its metrics (so it ran with telemetry on).
      expect(rc.requests.map((r) => r.path)).toContain("/v1/metrics");
      expect(rc.spans).toEqual([]);
    } finally {
      await Promise.all([ra.close(), rc.close()]);
    }
  });
});
