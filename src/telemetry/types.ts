import type { WorkerEventHub } from "../worker-events.js";

/** The types the worker and ./otel.js share (kept apart so ./otel.js never imports ./index.js). */

/** A start-up phase (contract 3's `phase` event): setup, sidecars, fitness, cache. */
export interface PhaseEvent {
  readonly phase: string;
  readonly state: "started" | "done" | "failed";
  readonly ms?: number;
}

/** Who the spans and metrics are about. */
export interface TelemetryIdentity {
  readonly workerId: string;
  readonly endpointId: string | undefined;
}

/** What the metrics read from the worker when they are collected. */
export interface WorkerView {
  readonly concurrency: number;
  readonly jobIds: readonly string[];
}

/** A worker's telemetry, as the worker drives it. */
export interface WorkerTelemetry {
  /** Listens to the worker's events and wraps its handler calls. */
  attach(events: WorkerEventHub, view: WorkerView): void;
  /** Records a start-up phase as a child of the worker's start span (and `setup` as a metric). */
  phase(event: PhaseEvent): void;
  /** Ends what is open and exports the last spans and metrics. */
  shutdown(): Promise<void>;
}
