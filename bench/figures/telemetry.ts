import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { BenchOptions } from "../options.js";
import { benchHarness, connectWorker, runJobs, settle } from "../session.js";
import { type Figure, figure, repeat } from "../stats.js";

const MiB = 1_048_576;

/**
 * What telemetry costs a worker at start (docs/observability.md): `runlet start` to its first
 * job-take, and its RSS once idle, with telemetry off (no OTEL_* variable: no OpenTelemetry package
 * is loaded) and on (OTEL_EXPORTER_OTLP_ENDPOINT naming a loopback sink that answers 200), in
 * alternating fresh processes, so that a machine whose load changes weighs on both sides alike
 * (medians of `telemetry.starts` each). Then a few jobs, so the on worker exports what it recorded.
 */
export async function measureTelemetry(options: BenchOptions): Promise<Figure[]> {
  const sink = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const once = async (on: boolean) => {
    const harness = await benchHarness(["local"]);
    const { worker, startToFirstTakeMs } = await connectWorker(
      harness,
      "local",
      { handler: "bench/handlers/trivial.ts" },
      on ? { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: "bench" } : {},
    );
    try {
      await settle(options.memory.settleMs);
      const idle = worker.rssBytes() ?? Number.NaN;
      await runJobs(
        harness,
        "local",
        Array.from({ length: 20 }, (_, n) => ({ n })),
      );
      return { firstTake: startToFirstTakeMs, idle };
    } finally {
      await worker.stop();
      await harness.close();
    }
  };
  try {
    const runs = await repeat(options.telemetry.starts, async () => ({
      off: await once(false),
      on: await once(true),
    }));
    return [
      figure(
        "telemetry.firstTake.off",
        "start → first job-take, telemetry off",
        "ms",
        runs.map((r) => r.off.firstTake),
      ),
      figure(
        "telemetry.firstTake.on",
        "start → first job-take, telemetry on (OTLP/HTTP)",
        "ms",
        runs.map((r) => r.on.firstTake),
      ),
      // Each start with telemetry on against the off start just before it: on a machine whose load
      // changes, the pairs' differences say more than the difference of the two medians.
      figure(
        "telemetry.firstTake.added",
        "start → first job-take, on − off (paired)",
        "ms",
        runs.map((r) => r.on.firstTake - r.off.firstTake),
      ),
      figure(
        "telemetry.idle.off",
        "worker RSS, idle, telemetry off",
        "MiB",
        runs.map((r) => r.off.idle / MiB),
      ),
      figure(
        "telemetry.idle.on",
        "worker RSS, idle, telemetry on",
        "MiB",
        runs.map((r) => r.on.idle / MiB),
      ),
      figure(
        "telemetry.idle.added",
        "worker RSS, idle, on − off (paired)",
        "MiB",
        runs.map((r) => (r.on.idle - r.off.idle) / MiB),
      ),
    ];
  } finally {
    sink.closeAllConnections();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
  }
}
