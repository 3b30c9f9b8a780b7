import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real OTLP/HTTP receiver on loopback for tests: it takes what the official exporters post
 * (OTLP JSON, `/v1/traces` and `/v1/metrics`) and decodes it into spans and metric names. Not a
 * mock of the exporter: the exporter runs as a user's would, over HTTP.
 */

export interface ReceivedSpan {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly kind: number;
  readonly start: number;
  readonly end: number;
  readonly attributes: Record<string, unknown>;
  readonly events: { name: string; attributes: Record<string, unknown> }[];
  readonly links: { traceId: string; spanId: string }[];
  readonly status: { code?: number; message?: string };
  readonly resource: Record<string, unknown>;
}

export interface ReceivedMetric {
  readonly name: string;
  readonly points: { attributes: Record<string, unknown>; value: unknown }[];
}

// biome-ignore lint/suspicious/noExplicitAny: OTLP JSON, decoded loosely: a test's receiver
type Loose = any;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
type OtlpAttr = { key: string; value: OtlpValue };

function attrs(list: OtlpAttr[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue === undefined ? undefined : Number(value.intValue)) ??
      value.doubleValue ??
      value.boolValue;
  }
  return out;
}

const nanosToMs = (n: string | number | undefined) => Number(BigInt(n ?? 0) / 1_000_000n);

export interface Receiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly metrics: ReceivedMetric[];
  /** Every request's path and content type, in order. */
  readonly requests: { path: string; contentType: string | undefined }[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const spans: ReceivedSpan[] = [];
  const metrics: ReceivedMetric[] = [];
  const requests: { path: string; contentType: string | undefined }[] = [];
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      requests.push({ path: req.url ?? "", contentType: req.headers["content-type"] });
      const body = JSON.parse(Buffer.concat(parts).toString("utf8") || "{}") as Record<string, unknown>;
      if (req.url === "/v1/traces") {
        for (const rs of (body["resourceSpans"] as Array<Record<string, Loose>>) ?? []) {
          const resource = attrs(rs["resource"]?.attributes);
          for (const ss of rs["scopeSpans"] ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                name: s.name,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId === "" ? undefined : s.parentSpanId,
                kind: s.kind,
                start: nanosToMs(s.startTimeUnixNano),
                end: nanosToMs(s.endTimeUnixNano),
                attributes: attrs(s.attributes),
                events: (s.events ?? []).map((e: { name: string; attributes?: OtlpAttr[] }) => ({
                  name: e.name,
                  attributes: attrs(e.attributes),
                })),
                links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({
                  traceId: l.traceId,
                  spanId: l.spanId,
                })),
                status: s.status ?? {},
                resource,
              });
            }
          }
        }
      } else if (req.url === "/v1/metrics") {
        for (const rm of (body["resourceMetrics"] as Array<Record<string, Loose>>) ?? []) {
          for (const sm of rm["scopeMetrics"] ?? []) {
            for (const m of sm.metrics ?? []) {
              const data = m.sum ?? m.gauge ?? m.histogram ?? {};
              metrics.push({
                name: m.name,
                points: (data.dataPoints ?? []).map((p: Record<string, Loose>) => ({
                  attributes: attrs(p["attributes"]),
                  value: p["asInt"] ?? p["asDouble"] ?? p["count"],
                })),
              });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    metrics,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
