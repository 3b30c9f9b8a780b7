import { RunletError } from "../errors.js";

/**
 * Whether telemetry is on, and where it goes, from the standard OpenTelemetry variables
 * (docs/observability.md) or the worker's `telemetry` option. This file imports no OpenTelemetry
 * package: a worker with telemetry off never loads one.
 */

/** The worker's `telemetry` option. */
export interface TelemetryOptions {
  /** The OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are added). @default OTEL_EXPORTER_OTLP_ENDPOINT */
  endpoint?: string;
  /** `service.name` of the spans and metrics. @default OTEL_SERVICE_NAME, else `runlet-worker` */
  serviceName?: string;
  /** Headers sent to the collector (e.g. an API key); never logged. @default OTEL_EXPORTER_OTLP_HEADERS */
  headers?: Readonly<Record<string, string>>;
  /** Export spans. @default true unless OTEL_TRACES_EXPORTER=none */
  traces?: boolean;
  /** Export metrics. @default true unless OTEL_METRICS_EXPORTER=none */
  metrics?: boolean;
  /** How often metrics are exported, in ms. @default OTEL_METRIC_EXPORT_INTERVAL, else 60_000 */
  metricIntervalMs?: number;
}

/** What the SDK is set up with, once telemetry is on. */
export interface TelemetrySettings {
  readonly tracesUrl: string | undefined;
  readonly metricsUrl: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly metricIntervalMs: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function invalid(message: string): RunletError {
  return new RunletError("RUNLET_CONFIG_INVALID", message);
}

/** `k1=v1,k2=v2` (values percent-encoded), as OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES write them. */
function keyValues(text: string | undefined, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined || text.trim() === "") return out;
  for (const part of text.split(",")) {
    const at = part.indexOf("=");
    const key = at < 0 ? "" : part.slice(0, at).trim();
    // The pair itself is not quoted: a header's value may be a secret.
    if (key === "") throw invalid(`${name} must be a list of key=value pairs separated by commas`);
    try {
      out[key] = decodeURIComponent(part.slice(at + 1).trim());
    } catch {
      throw invalid(`${name}: the value of ${key} is not valid percent-encoding`);
    }
  }
  return out;
}

/** An exporter's value: "otlp" (the default), "none", or an error for what runlet does not ship. */
function exporterOn(value: string | undefined, name: string): boolean {
  const v = value?.trim().toLowerCase();
  if (v === undefined || v === "" || v === "otlp") return true;
  if (v === "none") return false;
  throw invalid(
    `${name}=${value} is not supported: runlet exports with "otlp" (OTLP over HTTP/JSON), or "none"`,
  );
}

function httpUrl(value: string, name: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`${name} is not a URL (an http:// or https:// base such as http://localhost:4318)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(`${name} must be an http:// or https:// URL, got ${url.protocol}`);
  }
  return url;
}

/** `base` plus `/v1/<signal>`, as the OTLP/HTTP specification appends it to OTEL_EXPORTER_OTLP_ENDPOINT. */
function signalUrl(base: string, signal: string, name: string): string {
  const url = httpUrl(base, name);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/${signal}`;
  return url.href;
}

/**
 * The settings when telemetry is on, undefined when off. On when `option` is true or an object, or,
 * with no option, when an OTLP endpoint variable is set; `option: false` and OTEL_SDK_DISABLED=true
 * turn it off. Throws RUNLET_CONFIG_INVALID naming a bad variable.
 */
export function telemetrySettings(
  option: boolean | TelemetryOptions | undefined,
  env: Env,
): TelemetrySettings | undefined {
  if (option === false) return undefined;
  if (env["OTEL_SDK_DISABLED"]?.trim().toLowerCase() === "true" && option === undefined) return undefined;
  const opts: TelemetryOptions = typeof option === "object" ? option : {};
  const base = opts.endpoint ?? env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  const tracesEndpoint = opts.endpoint === undefined ? env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] : undefined;
  const metricsEndpoint =
    opts.endpoint === undefined ? env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] : undefined;
  const anyEndpoint = [base, tracesEndpoint, metricsEndpoint].some((v) => v !== undefined && v !== "");
  if (option === undefined && !anyEndpoint) return undefined;
  if (!anyEndpoint) {
    throw invalid(
      "telemetry is on but no collector is named: set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://localhost:4318) or telemetry.endpoint",
    );
  }
  const protocol = env["OTEL_EXPORTER_OTLP_PROTOCOL"]?.trim();
  if (protocol !== undefined && protocol !== "" && protocol !== "http/json") {
    throw invalid(
      `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: runlet exports OTLP over http/json`,
    );
  }
  const traces = opts.traces ?? exporterOn(env["OTEL_TRACES_EXPORTER"], "OTEL_TRACES_EXPORTER");
  const metrics = opts.metrics ?? exporterOn(env["OTEL_METRICS_EXPORTER"], "OTEL_METRICS_EXPORTER");
  const url = (
    signal: "traces" | "metrics",
    own: string | undefined,
    ownName: string,
  ): string | undefined => {
    if (own !== undefined && own !== "") return httpUrl(own, ownName).href;
    if (base === undefined || base === "") return undefined;
    return signalUrl(
      base,
      signal,
      opts.endpoint === undefined ? "OTEL_EXPORTER_OTLP_ENDPOINT" : "telemetry.endpoint",
    );
  };
  const interval = opts.metricIntervalMs ?? Number(env["OTEL_METRIC_EXPORT_INTERVAL"] ?? 60_000);
  if (!Number.isSafeInteger(interval) || interval < 100 || interval > 86_400_000) {
    throw invalid(
      "the metric export interval (OTEL_METRIC_EXPORT_INTERVAL) must be an integer from 100 to 86400000 ms",
    );
  }
  const resourceAttributes = keyValues(env["OTEL_RESOURCE_ATTRIBUTES"], "OTEL_RESOURCE_ATTRIBUTES");
  const serviceName =
    opts.serviceName ?? env["OTEL_SERVICE_NAME"] ?? resourceAttributes["service.name"] ?? "runlet-worker";
  return {
    tracesUrl: traces ? url("traces", tracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") : undefined,
    metricsUrl: metrics ? url("metrics", metricsEndpoint, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") : undefined,
    headers: opts.headers ?? keyValues(env["OTEL_EXPORTER_OTLP_HEADERS"], "OTEL_EXPORTER_OTLP_HEADERS"),
    serviceName,
    resourceAttributes,
    metricIntervalMs: interval,
  };
}
