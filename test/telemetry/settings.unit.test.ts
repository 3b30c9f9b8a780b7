import { describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { telemetrySettings } from "../../src/telemetry/settings.js";
import { readTraceContext, withTraceContext } from "../../src/telemetry/trace-context.js";

/** Which OTEL_* settings turn telemetry on, and the errors for bad ones. */

function errorOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (isRunletError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error("no error");
}

describe("telemetry settings", () => {
  it("is off without an endpoint, and with OTEL_SDK_DISABLED or telemetry: false", () => {
    expect(telemetrySettings(undefined, {})).toBeUndefined();
    expect(
      telemetrySettings(undefined, { OTEL_SERVICE_NAME: "x", OTEL_TRACES_EXPORTER: "otlp" }),
    ).toBeUndefined();
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(telemetrySettings(undefined, { ...endpoint, OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(telemetrySettings(false, endpoint)).toBeUndefined();
  });

  it("derives each signal's URL, the service name, headers and resource from the standard variables", () => {
    const s = telemetrySettings(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/base/",
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m:9000/custom",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc,x-team=gpu",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=from-resource",
      OTEL_METRIC_EXPORT_INTERVAL: "5000",
    });
    expect(s).toEqual({
      tracesUrl: "http://c:4318/base/v1/traces",
      metricsUrl: "http://m:9000/custom",
      headers: { authorization: "Bearer abc", "x-team": "gpu" },
      serviceName: "from-resource",
      resourceAttributes: { "deployment.environment": "prod", "service.name": "from-resource" },
      metricIntervalMs: 5000,
    });
    const traces = telemetrySettings(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_SERVICE_NAME: "svc",
    });
    expect(traces).toMatchObject({
      tracesUrl: "http://c:4318/v1/traces",
      metricsUrl: undefined,
      serviceName: "svc",
    });
    expect(telemetrySettings({ endpoint: "https://o:1", serviceName: "opt" }, {})).toMatchObject({
      tracesUrl: "https://o:1/v1/traces",
      metricsUrl: "https://o:1/v1/metrics",
      serviceName: "opt",
    });
  });

  it("refuses what runlet cannot do with a clear error, and never quotes a header's value", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(
      errorOf(() => telemetrySettings(undefined, { ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })),
    ).toEqual({
      code: "RUNLET_CONFIG_INVALID",
      message: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: runlet exports OTLP over http/json",
    });
    expect(
      errorOf(() => telemetrySettings(undefined, { ...endpoint, OTEL_TRACES_EXPORTER: "jaeger" })).message,
    ).toMatch(/^OTEL_TRACES_EXPORTER=jaeger is not supported/);
    expect(
      errorOf(() => telemetrySettings(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: "c:4318" })).message,
    ).toMatch(/OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/);
    expect(errorOf(() => telemetrySettings(true, {})).message).toMatch(/no collector is named/);
    const bad = errorOf(() =>
      telemetrySettings(undefined, { ...endpoint, OTEL_EXPORTER_OTLP_HEADERS: "secret-token-123" }),
    );
    expect(bad.message).toMatch(/OTEL_EXPORTER_OTLP_HEADERS must be a list of key=value pairs/);
    expect(bad.message).not.toContain("secret-token-123");
    expect(
      errorOf(() => telemetrySettings(undefined, { ...endpoint, OTEL_METRIC_EXPORT_INTERVAL: "0" })).message,
    ).toMatch(/from 100 to 86400000 ms/);
  });
});

describe("trace context in a job", () => {
  it("reads a valid traceparent and drops a malformed one or an oversized tracestate", () => {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    expect(readTraceContext({ traceparent, tracestate: "a=b", sentAt: 5 })).toEqual({
      traceparent,
      tracestate: "a=b",
      sentAt: 5,
    });
    expect(readTraceContext({ traceparent, tracestate: "x".repeat(513) })).toEqual({ traceparent });
    expect(readTraceContext({ traceparent: "00-zz-1-01" })).toBeUndefined();
    expect(readTraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")).toBeUndefined();
    expect(readTraceContext(undefined)).toBeUndefined();
  });

  it("stamps a given traceContext with sentAt, and leaves a body without one (and no active span) unchanged", () => {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    expect(withTraceContext({ input: 1, traceContext: { traceparent } }, 42)).toEqual({
      input: 1,
      traceContext: { traceparent, sentAt: 42 },
    });
    const body = { input: 1 };
    // No OpenTelemetry API registered in this file's realm before a worker starts one.
    const registered = (globalThis as Record<symbol, unknown>)[Symbol.for("opentelemetry.js.api.1")];
    expect(registered).toBeUndefined();
    expect(withTraceContext(body, 42)).toBe(body);
  });
});
