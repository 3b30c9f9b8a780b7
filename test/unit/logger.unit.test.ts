import { describe, expect, it } from "vitest";
import { capture } from "../support/log-capture.js";

describe('createLogger, platform mode (docs/protocol.md, "Logs")', () => {
  it("writes one JSON object a line: level, requestId (null outside a job) and message", () => {
    const { log, text } = capture();
    log.info("Worker started.");
    const job = log.child({ requestId: "job-1" });
    job.info("Started.");
    job.child({ part: "s3" }).warn("slow");
    job.info({ executionTimeMs: 12 }, "Finished.");
    expect(text()).toBe(
      [
        '{"level":"INFO","requestId":null,"message":"Worker started."}',
        '{"level":"INFO","requestId":"job-1","message":"Started."}',
        '{"level":"WARN","requestId":"job-1","part":"s3","message":"slow"}',
        '{"level":"INFO","requestId":"job-1","executionTimeMs":12,"message":"Finished."}',
        "",
      ].join("\n"),
    );
  });

  it("redacts secret-named keys at any depth and literal secret values anywhere in a line", () => {
    const { log, text, lines } = capture(["sk-literal-key-123"]);
    log.info(
      { apiKey: "a", nested: { Authorization: "Bearer b", list: [{ accessSecret: "c" }] }, ok: 1 },
      "calling with sk-literal-key-123",
    );
    log.child({ requestId: "j" }).error({ err: new Error("failed for sk-literal-key-123") }, "oops");
    expect(text()).not.toContain("sk-literal-key-123");
    const [first, second] = lines() as [Record<string, unknown>, Record<string, unknown>];
    expect(first).toEqual({
      level: "INFO",
      requestId: null,
      apiKey: "[redacted]",
      nested: { Authorization: "[redacted]", list: [{ accessSecret: "[redacted]" }] },
      ok: 1,
      message: "calling with [redacted]",
    });
    expect((second["err"] as { message: string }).message).toBe("failed for [redacted]");
  });
});
