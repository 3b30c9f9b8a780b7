import {
  type Attributes,
  type Context,
  context,
  type Meter,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import type { Logger } from "pino";
import type { Run, RunHandle } from "../handler/execute-run.js";
import { redactText } from "../log/redact-text.js";
import { VERSION } from "../version.js";
import type { WorkerEventHub, WorkerEvents } from "../worker-events.js";
import { type BatchTraceLink, type ShippedSpan, type TraceLink, tracedLog } from "./link.js";
import { type GlobalsLease, leaseGlobals } from "./otel-globals.js";
import type { TelemetrySettings } from "./settings.js";
import { fromShipped, toRef } from "./span-ref.js";
import { readTraceContext } from "./trace-context.js";
import type { PhaseEvent, TelemetryIdentity, WorkerTelemetry, WorkerView } from "./types.js";

/**
 * The OpenTelemetry side of a worker (docs/observability.md): spans and metrics built from the
 * worker's lifecycle events (src/worker/events.ts), plus the one wrapper that runs a handler inside
 * its span. Loaded by ./index.js only when telemetry is on.
 */

/** How many recently taken job ids are remembered to number a job's attempts on this worker. */
const ATTEMPT_MEMORY = 1_000;

/** One job's spans while the worker holds it. */
interface JobTrace {
  readonly span: Span;
  readonly context: Context;
  readonly takenAt: number;
  handler: Span | undefined;
  /** When the handler's wrapper settled (epoch ms): its span ends there once the outcome is known. */
  handlerEndedAt: number | undefined;
  batchAt: number | undefined;
  /** The `started` event's time: a handler span built from events starts there. */
  startedAt: number | undefined;
  chunks: number;
  chunkBytes: number;
  failedChunks: number;
  firstChunkAt: number | undefined;
  lastChunkAt: number | undefined;
  result: Span | undefined;
  outcome: string | undefined;
  code: string | undefined;
  executionTimeMs: number | undefined;
}

function errorStatus(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

export class OtelWorkerTelemetry implements WorkerTelemetry {
  readonly #tracer: Tracer;
  readonly #traces: TracerProvider | undefined;
  /** Where spans an isolation thread sent back go: the exporter's queue, beside runlet's own. */
  readonly #spanProcessor: BatchSpanProcessor | undefined;
  readonly #resource: ReturnType<typeof resourceFromAttributes>;
  readonly #meters: MeterProvider | undefined;
  readonly #identity: TelemetryIdentity;
  readonly #log: Logger;
  readonly #jobs = new Map<string, JobTrace>();
  readonly #attempts = new Map<string, number>();
  /** This worker's share of OpenTelemetry's globals (several workers may share a process). */
  readonly #globals: GlobalsLease;
  #start: Span | undefined;
  readonly #phases = new Map<string, number>();
  #view: WorkerView | undefined;
  readonly #instruments;

  constructor(settings: TelemetrySettings, identity: TelemetryIdentity, log: Logger) {
    this.#identity = identity;
    this.#log = log;
    const resource = resourceFromAttributes({
      ...settings.resourceAttributes,
      "service.name": settings.serviceName,
      "service.version": settings.resourceAttributes["service.version"] ?? VERSION,
      "service.instance.id": identity.workerId,
      "telemetry.sdk.name": "opentelemetry",
      "telemetry.sdk.language": "nodejs",
      "runlet.version": VERSION,
      ...(identity.endpointId === undefined ? {} : { "runlet.endpoint.id": identity.endpointId }),
    });
    this.#resource = resource;
    if (settings.tracesUrl !== undefined) {
      const exporter = new OTLPTraceExporter({ url: settings.tracesUrl, headers: { ...settings.headers } });
      this.#spanProcessor = new BatchSpanProcessor({ exporter });
      this.#traces = new TracerProvider({ resource, spanProcessors: [this.#spanProcessor] });
    }
    if (settings.metricsUrl !== undefined) {
      const exporter = new OTLPMetricExporter({ url: settings.metricsUrl, headers: { ...settings.headers } });
      const reader = new PeriodicExportingMetricReader({
        exporter,
        exportIntervalMillis: settings.metricIntervalMs,
        exportTimeoutMillis: Math.min(30_000, settings.metricIntervalMs),
      });
      this.#meters = new MeterProvider({ resource, readers: [reader] });
    }
    // The handler's own spans (the standard API's global tracer) go where runlet's go, and are
    // parented by the active context; an application that set up its own SDK keeps its globals.
    this.#globals = leaseGlobals(this.#traces);
    // Traces off (OTEL_TRACES_EXPORTER=none): runlet's spans record nothing (the global provider
    // may be another worker's in this process).
    this.#tracer = (this.#traces ?? new ProxyTracerProvider()).getTracer("runlet", VERSION);
    this.#instruments = this.#createInstruments(this.#meters?.getMeter("runlet", VERSION));
  }

  #createInstruments(meter: Meter | undefined) {
    if (meter === undefined) return undefined;
    const instruments = {
      jobs: meter.createCounter("runlet.jobs", { description: "Jobs ended, by outcome" }),
      duration: meter.createHistogram("runlet.job.duration", {
        description: "From the take to the job's result being queued",
        unit: "ms",
      }),
      delay: meter.createHistogram("runlet.job.delay", {
        description: "From the client sending the job to the worker taking it (jobs with trace context)",
        unit: "ms",
      }),
      streamBytes: meter.createCounter("runlet.stream.bytes", {
        description: "Stream chunk bytes posted",
        unit: "By",
      }),
      retries: meter.createCounter("runlet.post.retries", {
        description: "Posts to the platform retried, by what",
      }),
      setup: meter.createHistogram("runlet.setup.duration", { description: "Start-up phases", unit: "ms" }),
    };
    meter
      .createObservableGauge("runlet.jobs.in_flight", { description: "Jobs the worker holds" })
      .addCallback((result) => {
        if (this.#view !== undefined) result.observe(this.#view.jobIds.length);
      });
    meter
      .createObservableGauge("runlet.slots.free", { description: "Jobs the worker may still take" })
      .addCallback((result) => {
        const view = this.#view;
        if (view !== undefined) result.observe(Math.max(0, view.concurrency - view.jobIds.length));
      });
    return instruments;
  }

  attach(events: WorkerEventHub, view: WorkerView): void {
    this.#view = view;
    this.#start ??= this.#tracer.startSpan("runlet.worker.start", {
      startTime: Math.floor(performance.timeOrigin),
      attributes: this.#workerAttributes(),
    });
    const on = <K extends keyof WorkerEvents>(event: K, listener: (e: WorkerEvents[K]) => void) =>
      events.on(event, listener);
    on("taken", (e) => this.#taken(e));
    on("validated", (e) => this.#validated(e));
    on("started", (e) => {
      const job = this.#jobs.get(e.jobId);
      if (job !== undefined) job.startedAt = Date.now();
    });
    on("launched", (e) => {
      const job = this.#jobs.get(e.jobId);
      if (job !== undefined) job.batchAt = e.at;
    });
    on("chunkPosted", (e) => this.#chunkPosted(e));
    on("offloaded", (e) => this.#offloaded(e));
    on("finished", (e) => this.#ended(e.jobId, "completed", e.executionTimeMs, undefined, e.batch));
    on("failed", (e) => this.#ended(e.jobId, "failed", e.executionTimeMs, e, e.batch));
    on("retrying", (e) => this.#retrying(e));
    on("reported", (e) => this.#reported(e));
    // Start-up phases (contract 3): the events exist once the worker emits them; until then the
    // lead's code can call phase() itself.
    const untyped = events as unknown as { on(event: string, listener: (e: never) => void): void };
    untyped.on("phase", (e: PhaseEvent) => this.phase(e));
    untyped.on("ready", () => this.#endStart());
    // Traces off: no span for the handler to run under, and nothing for a thread to load.
    if (this.#traces === undefined) return;
    events.wrapHandler = (jobId, log, run) => this.#wrap(jobId, log, run);
    events.wrapBatch = (request, run) => this.#wrapBatch(request, run);
  }

  #workerAttributes(): Attributes {
    return {
      "runlet.worker.id": this.#identity.workerId,
      ...(this.#identity.endpointId === undefined ? {} : { "runlet.endpoint.id": this.#identity.endpointId }),
    };
  }

  phase(event: PhaseEvent): void {
    const now = Date.now();
    if (event.state === "started") {
      this.#phases.set(event.phase, now);
      return;
    }
    const startedAt = this.#phases.get(event.phase) ?? (event.ms === undefined ? now : now - event.ms);
    this.#phases.delete(event.phase);
    const parent = this.#start === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, this.#start);
    const span = this.#tracer.startSpan(
      `runlet.${event.phase}`,
      {
        startTime: startedAt,
        attributes: { "runlet.phase": event.phase, "runlet.phase.state": event.state },
      },
      parent,
    );
    if (event.state === "failed") errorStatus(span, `${event.phase} failed`);
    span.end(now);
    if (event.phase === "setup" && event.state === "done")
      this.#instruments?.setup.record(now - startedAt, {});
  }

  #endStart(): void {
    this.#start?.end();
    this.#start = undefined;
  }

  #taken(e: WorkerEvents["taken"]): void {
    // The first take ends the start-up span when no `ready` event came before it.
    this.#endStart();
    const now = Date.now();
    const attempt = (this.#attempts.get(e.jobId) ?? 0) + 1;
    this.#attempts.delete(e.jobId);
    this.#attempts.set(e.jobId, attempt);
    if (this.#attempts.size > ATTEMPT_MEMORY) {
      const oldest = this.#attempts.keys().next().value;
      if (oldest !== undefined) this.#attempts.delete(oldest);
    }
    const carried = readTraceContext(e.traceContext);
    const parent =
      carried === undefined
        ? ROOT_CONTEXT
        : new W3CTraceContextPropagator().extract(ROOT_CONTEXT, carried, {
            get: (carrier, key) => (carrier as unknown as Record<string, string | undefined>)[key],
            keys: (carrier) => Object.keys(carrier),
          });
    const delayMs = carried?.sentAt === undefined ? undefined : Math.max(0, now - carried.sentAt);
    const span = this.#tracer.startSpan(
      "runlet.job",
      {
        kind: SpanKind.CONSUMER,
        startTime: now,
        attributes: {
          ...this.#workerAttributes(),
          "runlet.job.id": e.jobId,
          "runlet.job.attempt": attempt,
          ...(delayMs === undefined ? {} : { "runlet.job.delay_ms": delayMs }),
        },
      },
      parent,
    );
    if (delayMs !== undefined) this.#instruments?.delay.record(delayMs, {});
    this.#jobs.set(e.jobId, {
      span,
      context: this.#globals.own(trace.setSpan(parent, span)),
      takenAt: now,
      handler: undefined,
      handlerEndedAt: undefined,
      batchAt: undefined,
      startedAt: undefined,
      chunks: 0,
      chunkBytes: 0,
      failedChunks: 0,
      firstChunkAt: undefined,
      lastChunkAt: undefined,
      result: undefined,
      outcome: undefined,
      code: undefined,
      executionTimeMs: undefined,
    });
  }

  #child(job: JobTrace, name: string, startTime: number, attributes: Attributes = {}): Span {
    return this.#tracer.startSpan(name, { startTime, attributes }, job.context);
  }

  #validated(e: WorkerEvents["validated"]): void {
    const job = this.#jobs.get(e.jobId);
    if (job === undefined) return;
    const span = this.#child(job, "runlet.validate", e.startedAt, { "runlet.input.valid": e.ok });
    if (!e.ok) errorStatus(span, "the input did not match the handler's schema");
    span.end();
  }

  /** Exports spans an isolation thread recorded (they ended there) with the worker's own. */
  readonly #receive = (spans: readonly ShippedSpan[]): void => {
    const processor = this.#spanProcessor;
    if (processor === undefined) return;
    for (const span of spans) processor.onEnd(fromShipped(span, this.#resource));
  };

  async #wrap<T>(jobId: string, log: Logger, run: (log: Logger, link?: TraceLink) => Promise<T>): Promise<T> {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return run(log);
    const span = this.#child(job, "runlet.handler", Date.now());
    job.handler = span;
    const link: TraceLink = { span: toRef(span.spanContext()), receive: this.#receive };
    try {
      // `run` is called at once (an isolation thread's run is launched inside it).
      return await context.with(trace.setSpan(job.context, span), () => run(tracedLog(log, link.span), link));
    } finally {
      job.handlerEndedAt = Date.now();
    }
  }

  /**
   * A batch's one handler call: the batch gets a span of its own (`runlet.batch.handler`, linked to
   * each job's span), which is the active context while the batch handler runs, and each job a
   * `runlet.batch` span (linked to it) whose ids its `jobs[i].log` lines carry.
   */
  #wrapBatch(request: Run, run: (request: Run) => RunHandle): RunHandle {
    const now = Date.now();
    const jobs = request.jobs.map((member) => this.#jobs.get(member.job.id));
    const attributes = { "runlet.batch.id": request.batchId, "runlet.batch.size": request.jobs.length };
    const batchSpan = this.#tracer.startSpan(
      "runlet.batch.handler",
      {
        startTime: now,
        attributes: { ...this.#workerAttributes(), ...attributes },
        links: jobs.flatMap((job) => (job === undefined ? [] : [{ context: job.span.spanContext() }])),
      },
      ROOT_CONTEXT,
    );
    const batchRef = toRef(batchSpan.spanContext());
    const jobRefs = request.jobs.map((_, index) => {
      const job = jobs[index];
      if (job === undefined) return batchRef;
      const span = this.#tracer.startSpan(
        "runlet.batch",
        { startTime: now, attributes, links: [{ context: batchSpan.spanContext() }] },
        job.context,
      );
      job.handler = span;
      return toRef(span.spanContext());
    });
    const link: BatchTraceLink = { span: batchRef, jobs: jobRefs, receive: this.#receive };
    const traced: Run = {
      ...request,
      log: tracedLog(request.log, batchRef),
      jobs: request.jobs.map((member, index) => ({
        ...member,
        log: tracedLog(member.log, jobRefs[index]),
      })),
      trace: link,
    };
    const batchRun = context.with(this.#globals.own(trace.setSpan(ROOT_CONTEXT, batchSpan)), () =>
      run(traced),
    );
    // Before the batch executor's own: each job's span ends where the call did.
    const outcomes = batchRun.outcomes.then((outcomes) => {
      const ended = Date.now();
      for (const job of jobs) if (job !== undefined) job.handlerEndedAt ??= ended;
      if (outcomes === "killed") errorStatus(batchSpan, "the batch was hard-stopped");
      batchSpan.end(ended);
      return outcomes;
    });
    return { ...batchRun, outcomes };
  }

  #chunkPosted(e: WorkerEvents["chunkPosted"]): void {
    const job = this.#jobs.get(e.jobId);
    if (e.ok) this.#instruments?.streamBytes.add(e.bytes, {});
    if (job === undefined) return;
    const now = Date.now();
    job.firstChunkAt ??= now;
    job.lastChunkAt = now;
    if (e.ok) {
      job.chunks += 1;
      job.chunkBytes += e.bytes;
    } else job.failedChunks += 1;
  }

  #offloaded(e: WorkerEvents["offloaded"]): void {
    const job = this.#jobs.get(e.jobId);
    if (job === undefined) return;
    const span = this.#child(job, "runlet.offload", e.startedAt, { "runlet.output.bytes": e.bytes });
    if (!e.ok) errorStatus(span, "offloading the output to S3 failed");
    span.end();
  }

  #ended(
    jobId: string,
    outcome: "completed" | "failed",
    executionTimeMs: number,
    failure: { readonly code: string; readonly message: string } | undefined,
    batch: WorkerEvents["finished"]["batch"],
  ): void {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return;
    const now = Date.now();
    job.outcome = outcome;
    job.code = failure?.code;
    job.executionTimeMs = executionTimeMs;
    // A handler run without the wrapper (an isolation thread) or in a batch gets its span here,
    // from what the events tell.
    let handler = job.handler;
    const from = job.batchAt ?? job.startedAt;
    if (handler === undefined && job.handlerEndedAt === undefined && from !== undefined) {
      const name = job.batchAt === undefined ? "runlet.handler" : "runlet.batch";
      handler = this.#child(job, name, from, {
        ...(batch === undefined
          ? {}
          : {
              "runlet.batch.id": batch.id,
              "runlet.batch.size": batch.size,
              "runlet.batch.wait_ms": batch.waitMs,
            }),
      });
    }
    if (handler !== undefined) {
      if (batch !== undefined) handler.setAttribute("runlet.batch.wait_ms", batch.waitMs);
      if (failure !== undefined) errorStatus(handler, redactText(failure.message, this.#log).slice(0, 500));
      handler.end(job.handlerEndedAt ?? now);
      job.handler = undefined;
    }
    job.result = this.#child(job, "runlet.result", now);
  }

  #retrying(e: WorkerEvents["retrying"]): void {
    const what =
      e.what === "the final result" ? "result" : e.what.split(" ")[0] === "stream" ? "chunk" : "progress";
    this.#instruments?.retries.add(1, { "runlet.post.what": what });
    const job = this.#jobs.get(e.jobId);
    if (job === undefined) return;
    const target = what === "result" && job.result !== undefined ? job.result : job.span;
    target.addEvent("retry", {
      "runlet.post.what": e.what,
      "runlet.post.attempt": e.attempt,
      "runlet.post.wait_ms": e.waitMs,
      ...(e.status === undefined ? {} : { "http.response.status_code": e.status }),
      ...(e.error === undefined ? {} : { "error.message": redactText(e.error, this.#log).slice(0, 200) }),
    });
  }

  #reported(e: WorkerEvents["reported"]): void {
    const job = this.#jobs.get(e.jobId);
    if (job === undefined) return;
    this.#jobs.delete(e.jobId);
    const now = Date.now();
    const outcome = e.delivery === "discarded" ? "stopped" : (job.outcome ?? "failed");
    if (job.handler !== undefined) {
      // Stopped by the platform: the handler's span ends where the handler did.
      job.handler.setAttribute("runlet.job.stopped", true);
      job.handler.end(job.handlerEndedAt ?? now);
    }
    if (job.firstChunkAt !== undefined) {
      const stream = this.#child(job, "runlet.stream", job.firstChunkAt, {
        "runlet.stream.chunks": job.chunks,
        "runlet.stream.bytes": job.chunkBytes,
        "runlet.stream.failed_chunks": job.failedChunks,
      });
      stream.end(job.lastChunkAt);
    }
    if (job.result !== undefined) {
      job.result.setAttribute("runlet.result.delivery", e.delivery);
      if (e.delivery !== "delivered") errorStatus(job.result, `the result was ${e.delivery}`);
      job.result.end(now);
    }
    job.span.setAttributes({
      "runlet.job.outcome": outcome,
      ...(job.code === undefined ? {} : { "runlet.job.error_code": job.code }),
      ...(job.executionTimeMs === undefined ? {} : { "runlet.job.execution_ms": job.executionTimeMs }),
    });
    if (outcome === "failed") errorStatus(job.span, job.code ?? "failed");
    job.span.end(now);
    this.#instruments?.jobs.add(1, { "runlet.job.outcome": outcome });
    this.#instruments?.duration.record(now - job.takenAt, { "runlet.job.outcome": outcome });
  }

  async shutdown(): Promise<void> {
    this.#endStart();
    // Jobs still held (a worker giving up on its posts) are ended as they stand.
    for (const [, job] of this.#jobs) {
      job.handler?.end();
      job.result?.end();
      job.span.setAttribute("runlet.job.outcome", "abandoned");
      job.span.end();
    }
    this.#jobs.clear();
    const results = await Promise.allSettled([this.#traces?.shutdown(), this.#meters?.shutdown()]);
    for (const r of results) {
      if (r.status === "rejected")
        this.#log.warn({ err: r.reason }, "exporting the last spans or metrics failed");
    }
    this.#globals.release();
  }
}
