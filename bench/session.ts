import { setTimeout as sleep } from "node:timers/promises";
import { type Harness, startHarness } from "../dist/harness/index.js";
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
