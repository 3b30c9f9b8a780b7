import {
  type Context,
  context,
  createContextKey,
  INVALID_SPAN_CONTEXT,
  propagation,
  type Span,
  type SpanOptions,
  type Tracer,
  type TracerOptions,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

/**
 * OpenTelemetry's globals (context manager, tracer provider, propagator) shared by every worker in
 * the process (docs/observability.md, "Several workers in one process"). The API lets each global
 * be set once, so they are registered when the first worker's telemetry starts and released when
 * the last one's shuts down (reference-counted). The tracer provider registered is a router: a
 * span made with the standard API goes to the provider of the worker whose job's context it is made
 * in (each worker's contexts carry it), else to the longest-running worker's. An application that
 * registered its own globals first keeps them.
 */

const OWNER = createContextKey("runlet.telemetry.owner");

/** One worker's share of the globals. */
export interface GlobalsLease {
  /** `ctx` marked as this worker's: spans the handler makes in it go to this worker's provider. */
  own(ctx: Context): Context;
  /** Gives the share back; the last one unregisters what runlet registered. */
  release(): void;
}

interface Member {
  readonly provider: TracerProvider | undefined;
}

const members: Member[] = [];
let registered:
  | { context: AsyncLocalStorageContextManager | undefined; trace: boolean; propagation: boolean }
  | undefined;

function providerFor(ctx: Context): TracerProvider | undefined {
  const owner = ctx.getValue(OWNER) as Member | undefined;
  if (owner?.provider !== undefined && members.includes(owner)) return owner.provider;
  return members.find((m) => m.provider !== undefined)?.provider;
}

/** A tracer that picks each span's worker from the context it is made in. */
class RoutingTracer implements Tracer {
  readonly #name: string;
  readonly #version: string | undefined;
  readonly #options: TracerOptions | undefined;

  constructor(name: string, version: string | undefined, options: TracerOptions | undefined) {
    this.#name = name;
    this.#version = version;
    this.#options = options;
  }

  startSpan(name: string, options?: SpanOptions, ctx: Context = context.active()): Span {
    const provider = providerFor(ctx);
    // No worker left (its telemetry shut down): a span that records nothing.
    if (provider === undefined) return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    return provider.getTracer(this.#name, this.#version, this.#options).startSpan(name, options, ctx);
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    ctx: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    a: SpanOptions | F,
    b?: Context | F,
    c?: F,
  ): ReturnType<F> {
    // As the SDK's own tracer: (name, fn), (name, options, fn) or (name, options, context, fn).
    const fn = (c ?? b ?? a) as F;
    const options = typeof a === "function" ? undefined : a;
    const parent = c === undefined ? context.active() : ((b as Context | undefined) ?? context.active());
    const span = this.startSpan(name, options, parent);
    return context.with(trace.setSpan(parent, span), () => fn(span) as ReturnType<F>);
  }
}

const router: TracerProvider = {
  getTracer: (name, version, options) => new RoutingTracer(name, version, options),
};

/** Takes a share of the globals for a worker whose spans go to `provider` (undefined: traces off). */
export function leaseGlobals(provider: TracerProvider | undefined): GlobalsLease {
  if (registered === undefined) {
    const manager = new AsyncLocalStorageContextManager();
    const contextSet = context.setGlobalContextManager(manager.enable());
    if (!contextSet) manager.disable();
    registered = {
      context: contextSet ? manager : undefined,
      trace: trace.setGlobalTracerProvider(router),
      propagation: propagation.setGlobalPropagator(new W3CTraceContextPropagator()),
    };
  }
  const member: Member = { provider };
  members.push(member);
  let released = false;
  return {
    own: (ctx) => ctx.setValue(OWNER, member),
    release: () => {
      if (released) return;
      released = true;
      members.splice(members.indexOf(member), 1);
      if (members.length > 0 || registered === undefined) return;
      if (registered.trace) trace.disable();
      if (registered.context !== undefined) context.disable();
      if (registered.propagation) propagation.disable();
      registered = undefined;
    },
  };
}
