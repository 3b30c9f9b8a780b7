import { createTraceState, type SpanContext } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import type { ShippedSpan, SpanRef } from "./link.js";

/**
 * Spans as plain data and back: what crosses an isolation thread's port (./link.js). Loaded only
 * with telemetry on (it imports the OpenTelemetry API).
 */

export function toRef(span: SpanContext): SpanRef {
  const state = span.traceState?.serialize();
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    traceFlags: span.traceFlags,
    ...(state === undefined || state === "" ? {} : { traceState: state }),
  };
}

/** `ref` as a span context: a local one (the span is this worker's, in another thread) unless `isRemote`. */
export function fromRef(ref: SpanRef, isRemote = false): SpanContext {
  return {
    traceId: ref.traceId,
    spanId: ref.spanId,
    traceFlags: ref.traceFlags,
    isRemote,
    ...(ref.traceState === undefined ? {} : { traceState: createTraceState(ref.traceState) }),
  };
}

/** A span as it crosses the thread's port: plain data (structured clone). */
export function toShipped(span: ReadableSpan): ShippedSpan {
  return {
    name: span.name,
    kind: span.kind,
    context: toRef(span.spanContext()),
    parent: span.parentSpanContext === undefined ? undefined : toRef(span.parentSpanContext),
    startTime: [span.startTime[0], span.startTime[1]],
    endTime: [span.endTime[0], span.endTime[1]],
    status: { ...span.status },
    attributes: { ...span.attributes },
    links: span.links.map((l) => ({ context: toRef(l.context), attributes: { ...l.attributes } })),
    events: span.events.map((e) => ({
      name: e.name,
      time: [e.time[0], e.time[1]],
      attributes: { ...e.attributes },
      droppedAttributesCount: e.droppedAttributesCount ?? 0,
    })),
    scope: { ...span.instrumentationScope },
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

const NANOS = 1_000_000_000;

/** A shipped span back as a readable span of `resource`, for the main thread's span processor. */
export function fromShipped(span: ShippedSpan, resource: ReadableSpan["resource"]): ReadableSpan {
  const ctx = fromRef(span.context);
  const startNs = span.startTime[0] * NANOS + span.startTime[1];
  const endNs = span.endTime[0] * NANOS + span.endTime[1];
  const durationNs = Math.max(0, endNs - startNs);
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => ctx,
    ...(span.parent === undefined ? {} : { parentSpanContext: fromRef(span.parent) }),
    startTime: [span.startTime[0], span.startTime[1]],
    endTime: [span.endTime[0], span.endTime[1]],
    status: {
      code: span.status.code,
      ...(span.status.message === undefined ? {} : { message: span.status.message }),
    },
    attributes: span.attributes as ReadableSpan["attributes"],
    links: span.links.map((l) => ({
      context: fromRef(l.context),
      attributes: l.attributes as ReadableSpan["attributes"],
    })),
    events: span.events.map((e) => ({
      name: e.name,
      time: [e.time[0], e.time[1]],
      attributes: e.attributes as ReadableSpan["attributes"],
      droppedAttributesCount: e.droppedAttributesCount,
    })),
    duration: [Math.floor(durationNs / NANOS), durationNs % NANOS],
    ended: true,
    resource,
    instrumentationScope: { ...span.scope },
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}
