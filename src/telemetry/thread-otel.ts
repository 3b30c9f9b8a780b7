import { context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { type ReadableSpan, type SpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { MAX_SHIPPED_SPANS_PER_RUN, type ShippedSpan, type ThreadTrace } from "./link.js";
import { fromRef, toShipped } from "./span-ref.js";

/**
 * OpenTelemetry in an isolation thread, loaded by ./thread.js on the first traced run. The thread
 * registers its own context manager, tracer provider and propagator (a thread has globals of its
 * own), records the handler's spans and sends each one to the main thread as it ends: no exporter
 * and no network here. A handler module that set up its own SDK in the thread keeps its globals.
 */

/** Sends each ended span to the main thread, at most {@link MAX_SHIPPED_SPANS_PER_RUN} a run. */
class ShippingProcessor implements SpanProcessor {
  readonly #ship: (spans: ShippedSpan[]) => void;
  shipped = 0;

  constructor(ship: (spans: ShippedSpan[]) => void) {
    this.#ship = ship;
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.shipped >= MAX_SHIPPED_SPANS_PER_RUN) return;
    this.shipped += 1;
    this.#ship([toShipped(span)]);
  }

  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

export class ThreadOtelTelemetry {
  readonly #processor: ShippingProcessor;

  constructor(ship: (spans: ShippedSpan[]) => void) {
    this.#processor = new ShippingProcessor(ship);
    const manager = new AsyncLocalStorageContextManager();
    if (!context.setGlobalContextManager(manager.enable())) manager.disable();
    trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [this.#processor] }));
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  }

  /** Runs `fn` with `threadTrace.span` as the active span (a local parent: the main thread's span). */
  run<T>(threadTrace: ThreadTrace, fn: () => Promise<T>): Promise<T> {
    this.#processor.shipped = 0;
    const parent = trace.setSpanContext(ROOT_CONTEXT, fromRef(threadTrace.span));
    return context.with(parent, fn);
  }
}
