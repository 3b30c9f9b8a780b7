import type { Logger } from "pino";
import type { ShippedSpan, ThreadTrace } from "./link.js";

/**
 * Telemetry inside an isolation thread (docs/observability.md, "Isolation threads and batches"):
 * a run that arrives with a {@link ThreadTrace} runs with that span as its active context, so the
 * handler's spans (the standard API) are its children. The thread records them and sends each one
 * back as it ends (`ship`); the main thread exports them with the worker's own. Nothing is loaded
 * until a traced run arrives: with telemetry off no run carries a trace.
 */

/** The loaded side (./thread-otel.js), once per thread. */
interface ThreadOtel {
  run<T>(trace: ThreadTrace, fn: () => Promise<T>): Promise<T>;
}

let loading: Promise<ThreadOtel | undefined> | undefined;

/**
 * Runs `fn` inside `trace`'s span when there is one (loading OpenTelemetry in this thread on the
 * first traced run), else as is. `ship` gets the spans that ended; `onLoadFailure` is told once
 * when the packages do not load here (the run goes on untraced).
 */
export async function withThreadTrace<T>(
  trace: ThreadTrace | undefined,
  ship: (spans: ShippedSpan[]) => void,
  onLoadFailure: (err: unknown) => void,
  fn: () => Promise<T>,
): Promise<T> {
  if (trace === undefined) return fn();
  loading ??= import("./thread-otel.js").then(
    (m): ThreadOtel => new m.ThreadOtelTelemetry(ship),
    (err: unknown) => {
      onLoadFailure(err);
      return undefined;
    },
  );
  const otel = await loading;
  return otel === undefined ? fn() : otel.run(trace, fn);
}

/**
 * The thread's wrapper of executeJob and executeBatch: `traced(msg.trace, executeJob)(options)`
 * runs it under the run's span. Told once (a warning) when OpenTelemetry does not load here.
 */
export function threadTracer(log: Logger, ship: (spans: ShippedSpan[]) => void) {
  const loadFailed = (err: unknown) =>
    log.warn(
      { err },
      "telemetry did not load in this isolation thread: its handler's spans are not recorded",
    );
  return <A, T>(trace: ThreadTrace | undefined, fn: (options: A) => Promise<T>) =>
    (options: A): Promise<T> =>
      withThreadTrace(trace, ship, loadFailed, () => fn(options));
}
