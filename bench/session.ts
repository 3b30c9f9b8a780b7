import { setTimeout as sleep } from "node:timers/promises";
import { type Harness, startHarness } from "../dist/harness/index.js";
import { startCeilingServer } from "./ceiling.js";
import { alternate, SIDES, type Side } from "./stats.js";
import { spawnNode, spawnRunletWorker, type WorkerProcess } from "./worker-process.js";

/** One worker process connected to a fresh harness endpoint. */
export interface Connected {
  readonly endpointId: string;
  readonly worker: WorkerProcess;
  /** From spawn to the harness receiving the worker's first job-take, ms. */
  readonly startToFirstTakeMs: number;
}

/** What runs as the worker: `runlet start <handler>`, or the streaming baseline. */
export type WorkerKind =
  | {
      readonly handler: string;
      /** The checkout whose `runlet start` runs it (its dist/ built). @default this one */
      readonly root?: string;
    }
  | { readonly baseline: true };

/** A harness for one bench section: rate limits off, the platform's log format on for workers. */
export function benchHarness(endpointIds: readonly string[]): Promise<Harness> {
  return startHarness({
    endpoints: endpointIds.map((id) => ({ id })),
    takeTimeoutMs: 5_000,
    rateLimits: { disabled: true },
  });
}

/** Starts a worker process for `endpointId` and waits for its first job-take. */
export async function connectWorker(
  harness: Harness,
  endpointId: string,
  kind: WorkerKind,
  env: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<Connected> {
  const workerEnv: Record<string, string> = {
    ...harness.workerEnv(endpointId),
    // On the platform RUNPOD_ENDPOINT_ID is set, so the worker logs JSON lines, as measured here.
    RUNPOD_ENDPOINT_ID: endpointId,
    ...env,
  };
  const podId = workerEnv["RUNPOD_POD_ID"] ?? "";
  const started = performance.now();
  const worker =
    "handler" in kind
      ? spawnRunletWorker(kind.handler, workerEnv, kind.root)
      : spawnNode("bin/run-ts.mjs", ["bench/baseline-worker.ts"], workerEnv);
  let exited = false;
  void worker.exited.then(() => {
    exited = true;
  });
  const until = Date.now() + timeoutMs;
  for (;;) {
    const taken = harness
      .requests({ endpointId })
      .some((r) => (r.route === "job-take" || r.route === "job-take-batch") && r.path.includes(podId));
    if (taken) return { endpointId, worker, startToFirstTakeMs: performance.now() - started };
    if (exited || Date.now() > until) {
      await worker.stop();
      throw new Error(
        `worker for ${endpointId} ${exited ? "exited" : "made no job-take"} before its first job-take:\n${worker.stderr()}`,
      );
    }
    await sleep(5);
  }
}

/** Enqueues one job per input and resolves with the elapsed ms once every one is terminal; throws unless all COMPLETED. */
export async function runJobs(
  harness: Harness,
  endpointId: string,
  inputs: readonly unknown[],
  timeoutMs = 300_000,
): Promise<{ elapsedMs: number; ids: string[] }> {
  const started = performance.now();
  const ids = inputs.map((input) => harness.enqueue(endpointId, { input }));
  const jobs = await Promise.all(ids.map((id) => harness.waitForJob(id, { timeoutMs })));
  const elapsedMs = performance.now() - started;
  const bad = jobs.find((j) => j.status !== "COMPLETED");
  if (bad !== undefined) throw new Error(`bench job ${bad.id} ended ${bad.status}: ${bad.error ?? ""}`);
  return { elapsedMs, ids };
}

/** Waits `ms`, letting a worker settle (finish logging, collect garbage) before its memory is read. */
export function settle(ms: number): Promise<void> {
  return sleep(ms);
}

/** How {@link compareWorkers} starts and warms up each side's worker. */
export interface CompareSetup {
  /** The handler, relative to each checkout's root (each side runs its own copy). */
  readonly handler: string;
  /** Added to each worker's environment. */
  readonly env?: Record<string, string>;
  /** Untimed work for one side's worker before the measured rounds (JIT, connections, caches). */
  warmUp(harness: Harness, endpointId: Side): Promise<unknown>;
}

/**
 * Two checkouts' workers on one harness and one ceiling server, for a before/after comparison
 * (`npm run bench -- --before`, bench/large-item.ts): `runlet start <handler>` of each root on its
 * own endpoint (named after its side), each warmed up, a second of idle (the worker loads its fast
 * transport once idle after a job), then `run` `rounds` times a side, alternating (ABBA).
 */
export async function compareWorkers<T>(
  roots: Readonly<Record<Side, string>>,
  rounds: number,
  setup: CompareSetup,
  run: (harness: Harness, side: Side, worker: WorkerProcess, ceilingUrl: string) => Promise<T>,
): Promise<Record<Side, T[]>> {
  const harness = await benchHarness(SIDES);
  const ceilingServer = await startCeilingServer();
  const workers = new Map<Side, WorkerProcess>();
  try {
    for (const side of SIDES) {
      const { worker } = await connectWorker(
        harness,
        side,
        { handler: setup.handler, root: roots[side] },
        setup.env,
      );
      workers.set(side, worker);
      await setup.warmUp(harness, side);
    }
    await settle(1_000);
    return await alternate(rounds, (side) => run(harness, side, workers.get(side)!, ceilingServer.url));
  } finally {
    await Promise.all([...workers.values()].map((w) => w.stop()));
    await harness.close();
    await ceilingServer.close();
  }
}
