import type { Logger } from "pino";
import { isMissingPackage, missingPeerError } from "../optional-peers.js";
import { type TelemetryOptions, telemetrySettings } from "./settings.js";
import type { TelemetryIdentity, WorkerTelemetry } from "./types.js";

/**
 * OpenTelemetry for a worker (docs/observability.md). Off unless the worker's `telemetry` option
 * or an OTLP endpoint variable turns it on; then ./otel.js, and the OpenTelemetry packages behind
 * it (optional peers), are loaded. Off, this module is all a worker loads of it.
 */

export type { TelemetryOptions } from "./settings.js";
export type { TraceContextField } from "./trace-context.js";
export type { PhaseEvent, TelemetryIdentity, WorkerTelemetry, WorkerView } from "./types.js";

/** The OpenTelemetry packages ./otel.js imports. */
export const TELEMETRY_PEERS = [
  "@opentelemetry/api",
  "@opentelemetry/context-async-hooks",
  "@opentelemetry/core",
  "@opentelemetry/exporter-metrics-otlp-http",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/resources",
  "@opentelemetry/sdk-metrics",
  "@opentelemetry/sdk-trace",
] as const;

/**
 * The worker's telemetry when `option` or `env` turns it on, else undefined (and nothing is
 * loaded). Throws RUNLET_CONFIG_INVALID for a bad variable, RUNLET_MISSING_PEER when it is on
 * and the OpenTelemetry packages are not installed.
 */
export async function loadTelemetry(
  option: boolean | TelemetryOptions | undefined,
  env: Readonly<Record<string, string | undefined>>,
  identity: TelemetryIdentity,
  log: Logger,
): Promise<WorkerTelemetry | undefined> {
  const settings = telemetrySettings(option, env);
  if (settings === undefined) return undefined;
  const otel = await import("./otel.js").catch((err: unknown) => {
    if (isMissingPackage(err, TELEMETRY_PEERS)) {
      throw missingPeerError(
        [...TELEMETRY_PEERS],
        "telemetry (OTEL_EXPORTER_OTLP_ENDPOINT or the telemetry option)",
        err,
      );
    }
    throw err;
  });
  const where = (url: string | undefined) => {
    if (url === undefined) return undefined;
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`; // no credentials, no query
  };
  log.info(
    {
      traces: where(settings.tracesUrl),
      metrics: where(settings.metricsUrl),
      serviceName: settings.serviceName,
    },
    "telemetry on: exporting OTLP over HTTP/JSON",
  );
  return new otel.OtelWorkerTelemetry(settings, identity, log);
}
