import { describe, expect, it } from "vitest";
import { readPlatformEnv } from "../../src/config.js";
import { expandTemplate, swapTakeRoute, withQuery } from "../../src/protocol/index.js";

describe("URL templates", () => {
  const values = { podId: "pod 1", gpuTypeId: "A100", id: "job-9" };

  it("substitutes every placeholder, encoding the values", () => {
    expect(expandTemplate("http://h/v2/e/job-done/$RUNPOD_POD_ID/$ID?gpu=$RUNPOD_GPU_TYPE_ID", values)).toBe(
      "http://h/v2/e/job-done/pod%201/job-9?gpu=A100",
    );
  });

  it("adds query parameters whether or not the template ends in a bare ?", () => {
    expect(withQuery("http://h/a?", { job_in_progress: 0 })).toBe("http://h/a?job_in_progress=0");
    expect(withQuery("http://h/a?gpu=x", { job_in_progress: 1, skip: undefined })).toBe(
      "http://h/a?gpu=x&job_in_progress=1",
    );
  });

  it("swaps the job-take route for batch and stop", () => {
    expect(swapTakeRoute("http://h/v2/e/job-take/w?gpu=x", "job-take-batch")).toBe(
      "http://h/v2/e/job-take-batch/w?gpu=x",
    );
    expect(swapTakeRoute("http://h/v2/e/job-take/w", "job-stop")).toBe("http://h/v2/e/job-stop/w");
    expect(() => swapTakeRoute("http://h/v2/e/take/w", "job-stop")).toThrow(/no \/job-take\/ segment/);
  });
});

describe("platform environment", () => {
  it("applies the documented defaults", () => {
    const env = readPlatformEnv({});
    expect(env.jobTakeUrl).toBeUndefined();
    expect(env.pingIntervalMs).toBe(10_000);
    expect(env.hostname).toBe("unknown");
    expect(env.gpuTypeId).toBe("unknown");
    expect(env.podId).toMatch(/^[0-9a-f-]{36}$/);
    expect(env.logLevel).toBe("info");
    expect(Object.isFrozen(env)).toBe(true);
  });

  it("accepts the platform worker's log level names, falling back to RUNPOD_DEBUG_LEVEL", () => {
    expect(readPlatformEnv({ RUNPOD_LOG_LEVEL: "NOTSET" }).logLevel).toBe("trace");
    expect(readPlatformEnv({ RUNPOD_LOG_LEVEL: "WARNING" }).logLevel).toBe("warn");
    expect(readPlatformEnv({ RUNPOD_LOG_LEVEL: "CRITICAL" }).logLevel).toBe("fatal");
    expect(readPlatformEnv({ RUNPOD_DEBUG_LEVEL: "DEBUG" }).logLevel).toBe("debug");
    expect(readPlatformEnv({ RUNPOD_LOG_LEVEL: "error", RUNPOD_DEBUG_LEVEL: "DEBUG" }).logLevel).toBe(
      "error",
    );
    const odd = readPlatformEnv({ RUNPOD_LOG_LEVEL: "chatty" });
    expect(odd.logLevel).toBe("info");
    expect(odd.warnings).toEqual([
      'log level "chatty" is unknown; using info (known: notset, trace, debug, info, warn, warning, error, critical, fatal, silent)',
    ]);
  });

  it("rounds and clamps a ping interval the platform's worker would accept, with a warning", () => {
    expect(readPlatformEnv({ RUNPOD_PING_INTERVAL: "2500" })).toMatchObject({
      pingIntervalMs: 2500,
      warnings: [],
    });
    expect(readPlatformEnv({ RUNPOD_PING_INTERVAL: "2500.4" })).toMatchObject({
      pingIntervalMs: 2500,
      warnings: ["RUNPOD_PING_INTERVAL=2500.4 adjusted to 2500 ms (an integer from 100 to 600000)"],
    });
    expect(readPlatformEnv({ RUNPOD_PING_INTERVAL: "0" }).pingIntervalMs).toBe(100);
    expect(readPlatformEnv({ RUNPOD_PING_INTERVAL: "3600000" }).pingIntervalMs).toBe(600_000);
  });

  it("names the variable when a value is bad", () => {
    expect(() => readPlatformEnv({ RUNPOD_PING_INTERVAL: "soon" })).toThrow(/RUNPOD_PING_INTERVAL/);
    expect(() => readPlatformEnv({ RUNPOD_WEBHOOK_GET_JOB: "not a url" })).toThrow(/RUNPOD_WEBHOOK_GET_JOB/);
  });

  it("reads the default store only when all three BUCKET_* variables are set", () => {
    expect(readPlatformEnv({ BUCKET_ENDPOINT_URL: "http://127.0.0.1:1" }).bucket).toBeUndefined();
    expect(
      readPlatformEnv({
        BUCKET_ENDPOINT_URL: "http://127.0.0.1:1",
        BUCKET_ACCESS_KEY_ID: "a",
        BUCKET_SECRET_ACCESS_KEY: "b",
      }).bucket,
    ).toEqual({ endpointUrl: "http://127.0.0.1:1", accessKeyId: "a", secretAccessKey: "b" });
  });
});
