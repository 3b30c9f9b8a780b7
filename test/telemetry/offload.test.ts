import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { startReceiver } from "../support/otlp-receiver.js";
import { useS3rver } from "../support/use-s3rver.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

/** The offload span, against s3rver (a real S3-protocol server on loopback) and a real OTLP receiver. */

const BUCKET = "otel-offload";
const SECRET = "offload-secret-4d2a9c";
const s3rver = useS3rver(BUCKET);

describe("telemetry of an offloaded output", () => {
  it("adds a runlet.offload span with the output's size between the handler and the result, and no secret", async () => {
    const receiver = await startReceiver();
    try {
      await using h = memoryHarness();
      const big = defineHandler({ input: z.object({}), handler: () => ({ blob: "x".repeat(5_000) }) });
      const worker = await workerFor(h, big, {
        env: { ...h.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        maxResultBytes: 2_000,
        // s3rver listens on loopback, which a job's own s3Config may reach only when allowed (docs/s3.md).
        allowPrivateAddresses: true,
      });
      const s3Config = {
        accessId: "S3RVER",
        accessSecret: SECRET,
        bucketName: BUCKET,
        endpointUrl: s3rver.endpoint,
      };
      const id = h.enqueue("local", { input: {}, s3Config });
      await waitFor("the job to complete", () => h.job(id)?.status === "COMPLETED");
      await worker.close();

      const job = receiver.spans.find((s) => s.name === "runlet.job" && s.attributes["runlet.job.id"] === id);
      const children = receiver.spans.filter((s) => s.parentSpanId === job?.spanId).map((s) => s.name);
      expect(children).toEqual(expect.arrayContaining(["runlet.handler", "runlet.offload", "runlet.result"]));
      const offload = receiver.spans.find((s) => s.name === "runlet.offload");
      expect(offload?.attributes["runlet.output.bytes"]).toBe(
        Buffer.byteLength(JSON.stringify({ blob: "x".repeat(5_000) })),
      );
      expect(offload?.status.code ?? 0).not.toBe(2);
      const handler = receiver.spans.find((s) => s.name === "runlet.handler");
      const result = receiver.spans.find((s) => s.name === "runlet.result");
      expect(offload!.start).toBeGreaterThanOrEqual(handler!.end);
      expect(result!.start).toBeGreaterThanOrEqual(offload!.end);
      expect(JSON.stringify(receiver.spans)).not.toContain(SECRET);
    } finally {
      await receiver.close();
    }
  });
});
