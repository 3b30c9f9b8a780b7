import { describe, expect, it } from "vitest";
import { z } from "zod";
import { errorReport, finalBodyText, isErrorReturn, returnedResult } from "../../src/handler/index.js";
import { defineHandler, isHandlerDefinition } from "../../src/index.js";

const handler = () => "ok";

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect((err as { code?: string }).code).toBe("RUNLET_HANDLER_INVALID");
    return (err as Error).message;
  }
  throw new Error("expected a throw");
}

describe("defineHandler", () => {
  it("returns a frozen, branded definition with the documented defaults", () => {
    const d = defineHandler({ input: z.object({ a: z.string() }), handler });
    expect(isHandlerDefinition(d)).toBe(true);
    expect(Object.isFrozen(d)).toBe(true);
    expect(d).toMatchObject({
      concurrency: 1,
      executionTimeoutMs: 600_000,
      refreshWorker: false,
      isolation: "in-process",
      returnAggregateStream: false,
      streamCoalesceMs: 0,
      hardStopGraceMs: 5_000,
      maxBufferedStreamBytes: 4_194_304,
    });
    expect(isHandlerDefinition({ handler })).toBe(false);
  });

  it("names the bad option, what it expects and what came", () => {
    expect(message(() => defineHandler({ handler, concurrency: 0 }))).toBe(
      "defineHandler: concurrency must be an integer ≥ 1 (or a function), got 0",
    );
    expect(message(() => defineHandler({ handler, executionTimeoutMs: 1.5 }))).toBe(
      "defineHandler: executionTimeoutMs must be an integer ≥ 1, got 1.5",
    );
    expect(message(() => defineHandler({ handler, isolation: "process" as never }))).toBe(
      'defineHandler: isolation must be "in-process" or "thread", got "process"',
    );
    expect(message(() => defineHandler({ handler: "nope" as never }))).toBe(
      'defineHandler: handler must be a function, got "nope"',
    );
    expect(message(() => defineHandler({ handler, input: { parse() {} } as never }))).toBe(
      "defineHandler: input must be a zod schema, got an object",
    );
    expect(message(() => defineHandler({ handler, refreshWorker: "yes" as never }))).toBe(
      'defineHandler: refreshWorker must be true or false, got "yes"',
    );
  });
});

describe("output normalisation", () => {
  it("treats only an object whose one defined key is a string error as a failure", () => {
    expect(isErrorReturn({ error: "x" })).toBe(true);
    expect(isErrorReturn({ error: "x", extra: undefined })).toBe(true);
    expect(isErrorReturn({ error: "x", detail: 1 })).toBe(false);
    expect(isErrorReturn({ error: { nested: true } })).toBe(false);
    expect(isErrorReturn(["error"])).toBe(false);
  });

  it("builds exact job-done bodies", () => {
    expect(finalBodyText(returnedResult({ a: 1 }, false))).toBe('{"output":{"a":1}}');
    expect(finalBodyText(returnedResult(undefined, true))).toBe('{"output":null,"stopPod":true}');
    expect(finalBodyText(returnedResult({ error: "bad" }, false))).toBe('{"error":"bad"}');
  });

  it("reports a thrown object by its constructor and JSON", () => {
    const report = errorReport({ reason: "x" }, { hostname: "h", workerId: "w" });
    expect(report).toMatchObject({
      error_type: "Object",
      error_message: '{"reason":"x"}',
      hostname: "h",
      worker_id: "w",
    });
  });
});
