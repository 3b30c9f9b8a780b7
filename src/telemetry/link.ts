/**
 * What telemetry hands the execution layer for one handler run, so that spans made inside the
 * handler are children of runlet's span wherever the handler runs (docs/observability.md, "Isolation
 * threads and batches"). Plain, structured-cloneable data: it crosses to an isolation thread with
 * the job. No OpenTelemetry package is imported here.
 */

/** A span's identity (W3C trace context's parts). */
export interface SpanRef {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  /** W3C `tracestate`, serialized. */
  readonly traceState?: string;
}

/** One event of a {@link ShippedSpan}. */
export interface ShippedEvent {
  readonly name: string;
  readonly time: readonly [number, number];
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly droppedAttributesCount: number;
}

/**
 * A span that ended in an isolation thread, as the thread sends it to the main thread, which
 * exports it with the worker's own spans (one exporter, the main thread's: it does all networking).
 */
export interface ShippedSpan {
  readonly name: string;
  readonly kind: number;
  readonly context: SpanRef;
  readonly parent: SpanRef | undefined;
  readonly startTime: readonly [number, number];
  readonly endTime: readonly [number, number];
  readonly status: { readonly code: number; readonly message?: string };
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly links: readonly {
    readonly context: SpanRef;
    readonly attributes: Readonly<Record<string, unknown>>;
  }[];
  readonly events: readonly ShippedEvent[];
  readonly scope: { readonly name: string; readonly version?: string; readonly schemaUrl?: string };
  readonly droppedAttributesCount: number;
  readonly droppedEventsCount: number;
  readonly droppedLinksCount: number;
}

/**
 * The most spans one isolation thread's run may send back: a handler that makes spans in a loop
 * flood the thread's message port (the exporter's queue on the main thread drops past its own
 * bound too). Counted per run, in the thread; the rest are dropped there.
 */
export const MAX_SHIPPED_SPANS_PER_RUN = 2_048;

/** The span a handler runs under, and where spans recorded in an isolation thread go. */
export interface TraceLink {
  /** The span that is the handler's active context: its spans are children of it. */
  readonly span: SpanRef;
  /** Exports spans an isolation thread recorded and sent back (the main thread only). */
  receive(spans: readonly ShippedSpan[]): void;
}

/** A batch's link: the batch's span is the active context; each job's own span, for its log lines. */
export interface BatchTraceLink extends TraceLink {
  /** Each job's span, in the order of the batch's members. */
  readonly jobs: readonly SpanRef[];
}

/** What crosses to an isolation thread with a run (a {@link TraceLink} without its function). */
export interface ThreadTrace {
  readonly span: SpanRef;
  /** A batch's jobs' spans, in order. */
  readonly jobs?: readonly SpanRef[];
}

/** The part of a link that is sent to a thread. */
export function threadTrace(link: TraceLink | BatchTraceLink | undefined): ThreadTrace | undefined {
  if (link === undefined) return undefined;
  return "jobs" in link ? { span: link.span, jobs: link.jobs } : { span: link.span };
}

/** The fields a log line carries to name its span (as OpenTelemetry's log correlation names them). */
export interface TraceLogFields {
  readonly trace_id: string;
  readonly span_id: string;
  readonly trace_flags: string;
}

export function traceLogFields(span: SpanRef): TraceLogFields {
  return {
    trace_id: span.traceId,
    span_id: span.spanId,
    trace_flags: `0${(span.traceFlags & 0xff).toString(16)}`.slice(-2),
  };
}

/** `log` with `span`'s ids bound, or `log` itself without a span. */
export function tracedLog<L extends { child(bindings: Record<string, unknown>): L }>(
  log: L,
  span: SpanRef | undefined,
): L {
  return span === undefined ? log : log.child({ ...traceLogFields(span) });
}
