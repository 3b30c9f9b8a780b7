/**
 * W3C trace context carried through a job (docs/protocol.md, "Trace context"): the platform hands a
 * worker only the job body, so a client puts `traceparent` (and `tracestate`) in a top-level
 * `traceContext` field beside `input`, which the platform passes through untouched. No
 * OpenTelemetry package is imported here: runlet's client uses it without loading one.
 */

/** The job body's field that carries the trace context. */
export const TRACE_CONTEXT_FIELD = "traceContext";

/** The `traceContext` field of a job body. */
export interface TraceContextField {
  /** W3C `traceparent`: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`. */
  readonly traceparent: string;
  /** W3C `tracestate`, at most 512 characters. */
  readonly tracestate?: string;
  /** When the client sent the job (epoch ms): the worker's span records the delay before the take from it. */
  readonly sentAt?: number;
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$/;
/** W3C trace context's bound on `tracestate` (32 members of up to 16 characters... in practice 512). */
export const MAX_TRACESTATE_CHARS = 512;

/**
 * The trace context in a delivered job's `traceContext` value, or undefined (with no error: a job
 * with a bad one runs untraced-from-the-client, in a trace of its own) when absent or malformed.
 */
export function readTraceContext(value: unknown): TraceContextField | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { traceparent, tracestate, sentAt } = value as Record<string, unknown>;
  if (typeof traceparent !== "string" || traceparent.length > 512 || !TRACEPARENT.test(traceparent)) {
    return undefined;
  }
  return {
    traceparent,
    ...(typeof tracestate === "string" && tracestate.length <= MAX_TRACESTATE_CHARS ? { tracestate } : {}),
    ...(typeof sentAt === "number" && Number.isFinite(sentAt) ? { sentAt } : {}),
  };
}

/** The parts of OpenTelemetry's global API object that {@link activeTraceContext} reads. */
interface GlobalOtelApi {
  readonly context?: { active(): unknown };
  readonly propagation?: {
    inject(context: unknown, carrier: Record<string, string>, setter: unknown): void;
  };
}

/**
 * The trace context of the caller's active span, when the application has set up OpenTelemetry
 * (its API registers itself on `globalThis` under this symbol) with a propagator; undefined
 * otherwise. Reads only that global: runlet's client never imports OpenTelemetry.
 */
export function activeTraceContext(now: number): TraceContextField | undefined {
  const api = (globalThis as Record<symbol, unknown>)[Symbol.for("opentelemetry.js.api.1")] as
    | GlobalOtelApi
    | undefined;
  if (api?.context === undefined || api.propagation === undefined) return undefined;
  const carrier: Record<string, string> = {};
  try {
    api.propagation.inject(api.context.active(), carrier, {
      set(c: Record<string, string>, key: string, value: string) {
        c[key] = value;
      },
    });
  } catch {
    return undefined;
  }
  const found = readTraceContext({ ...carrier, sentAt: now });
  return found;
}

/**
 * `body` with a `traceContext` field: the one it has (stamped with `sentAt` when it lacks one), else
 * the active span's, else `body` unchanged.
 */
export function withTraceContext<B extends object>(body: B, now = Date.now()): B {
  const own = (body as Record<string, unknown>)[TRACE_CONTEXT_FIELD];
  if (typeof own === "object" && own !== null) {
    if ((own as { sentAt?: unknown }).sentAt !== undefined) return body;
    return { ...body, [TRACE_CONTEXT_FIELD]: { ...own, sentAt: now } };
  }
  if (own !== undefined) return body;
  const active = activeTraceContext(now);
  return active === undefined ? body : { ...body, [TRACE_CONTEXT_FIELD]: active };
}
