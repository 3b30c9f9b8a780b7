import { setTimeout as sleep } from "node:timers/promises";
import type { Harness } from "../../dist/harness/index.js";
import { bracketed, ownCpuMs, processCpuMs, startCeilingServer } from "../ceiling.js";
import type { BenchOptions } from "../options.js";
import { measureRelayFloor, overheadClient, timedRoundTrip } from "../relay.js";
import { benchHarness, compareWorkers, connectWorker, runJobs } from "../session.js";
import { type Figure, figure, percentile, repeat, type Side } from "../stats.js";

const TRIVIAL = "bench/handlers/trivial.ts";

/** What the worker posts for one trivial job (job-done), for the ceiling loop. */
const JOB_DONE_BODY = JSON.stringify({ output: { n: 1234, handlerMs: 0.0123 } });

/**
 * Job throughput at each concurrency level: jobs/s through the harness and one `runlet start`
 * process; beside it, measured right before and after each run, the ceiling (a bare undici loop
 * posting the job-done body to a bare node:http server with as many posts in flight as the
 * concurrency), the ratio, and the
 * CPU time per job of the worker process and of the bench process (harness + the bench's driver).
 */
export async function measureThroughput(
  options: BenchOptions,
  /** The checkout whose worker runs (bench/http-layer.ts's `--worker-root`). @default this one */
  workerRoot?: string,
): Promise<{ figures: Figure[]; startToFirstTakeMs: number[] }> {
  const figures: Figure[] = [];
  const starts: number[] = [];
  const ceilingServer = await startCeilingServer();
  try {
    for (const concurrency of options.throughput.concurrency) {
      figures.push(...(await measureLevel(options, concurrency, ceilingServer.url, starts, workerRoot)));
    }
  } finally {
    await ceilingServer.close();
  }
  return { figures, startToFirstTakeMs: starts };
}

/** `count` inputs of the trivial handler. */
const jobInputs = (count: number) => Array.from({ length: count }, (_, n) => ({ n }));

/** What one throughput run queues and where its ceiling posts. */
export interface ThroughputLoad {
  /** Jobs queued at once. */
  readonly jobs: number;
  /** The worker's handler concurrency (the ceiling keeps as many posts in flight). */
  readonly concurrency: number;
  /** The bare ceiling server's URL. */
  readonly ceilingUrl: string;
}

/** One paired throughput run and its values, as the `throughput.c<N>…` figures hold them. */
export interface ThroughputRun {
  readonly perSecond: number;
  readonly ceiling: number;
  readonly ratio: number;
  /** Worker CPU per job, ms. */
  readonly workerCpu: number;
  /** Bench-process (harness) CPU per job, ms. */
  readonly harnessCpu: number;
}

/**
 * One run of `load.jobs` trivial jobs through `endpointId`'s worker (process `workerPid`), its
 * ceiling measured right before and after it: jobs/s, the ratio, and the CPU per job of each side.
 */
export async function throughputRun(
  harness: Harness,
  endpointId: string,
  workerPid: number,
  load: ThroughputLoad,
): Promise<ThroughputRun> {
  const { jobs, concurrency, ceilingUrl } = load;
  const { result, ceiling } = await bracketed(
    {
      url: `${ceilingUrl}/v2/local/job-done/pod-1/job-1?gpu=LOCAL&isStream=false`,
      body: JOB_DONE_BODY,
      count: Math.max(jobs, 200),
      inFlight: concurrency,
    },
    async () => {
      const workerCpu0 = processCpuMs(workerPid) ?? Number.NaN;
      const ownCpu0 = ownCpuMs();
      const { elapsedMs } = await runJobs(harness, endpointId, jobInputs(jobs));
      return {
        elapsedMs,
        workerCpuMs: (processCpuMs(workerPid) ?? Number.NaN) - workerCpu0,
        harnessCpuMs: ownCpuMs() - ownCpu0,
      };
    },
  );
  const perSecond = jobs / (result.elapsedMs / 1000);
  return {
    perSecond,
    ceiling,
    ratio: perSecond / ceiling,
    workerCpu: result.workerCpuMs / jobs,
    harnessCpu: result.harnessCpuMs / jobs,
  };
}

/**
 * Milliseconds the worker is left idle between the two halves of its warm-up: over its
 * `WARM_UP_IDLE_MS` (250 ms, src/worker/platform/platform-http.ts), so it loads undici's Pool then.
 */
const POOL_IDLE_MS = 500;

/**
 * Warms a worker up for the throughput runs: `jobs` jobs, a pause in which it is idle long enough to
 * load undici's Pool, then `jobs` more, so the runs measure the path a worker that has run a while
 * takes. With the first half alone, the Pool loaded in the pause before the first run and its code
 * was still cold there: the first one or two of five runs at c64 came out at about half the ratio
 * of the rest (0.35 against 0.64–0.75, 2026-11-27), and the median moved with how many did.
 */
export async function warmUpWorker(harness: Harness, endpointId: string, jobs: number): Promise<void> {
  await runJobs(harness, endpointId, jobInputs(jobs));
  await sleep(POOL_IDLE_MS);
  await runJobs(harness, endpointId, jobInputs(jobs));
}

/**
 * The job throughput of two checkouts' workers at each level of `concurrency`, for
 * `npm run bench -- --before`: per level one harness (compareWorkers), one worker of each side
 * warmed up with `warmupJobs`, and `rounds` rounds of {@link throughputRun} alternating the sides
 * (ABBA).
 */
export async function compareThroughput(
  roots: Readonly<Record<Side, string>>,
  sizes: { readonly concurrency: readonly number[]; readonly jobs: number; readonly warmupJobs: number },
  rounds: number,
): Promise<Array<{ concurrency: number; runs: Record<Side, ThroughputRun[]> }>> {
  const levels: Array<{ concurrency: number; runs: Record<Side, ThroughputRun[]> }> = [];
  for (const concurrency of sizes.concurrency) {
    const runs = await compareWorkers(
      roots,
      rounds,
      {
        handler: TRIVIAL,
        env: { BENCH_CONCURRENCY: String(concurrency) },
        warmUp: (harness, side) => warmUpWorker(harness, side, sizes.warmupJobs),
      },
      (harness, side, worker, ceilingUrl) =>
        throughputRun(harness, side, worker.pid, { jobs: sizes.jobs, concurrency, ceilingUrl }),
    );
    levels.push({ concurrency, runs });
  }
  return levels;
}

async function measureLevel(
  options: BenchOptions,
  concurrency: number,
  ceilingUrl: string,
  starts: number[],
  workerRoot: string | undefined,
): Promise<Figure[]> {
  const figures: Figure[] = [];
  const harness = await benchHarness(["local"]);
  const { worker, startToFirstTakeMs } = await connectWorker(
    harness,
    "local",
    { handler: TRIVIAL, ...(workerRoot === undefined ? {} : { root: workerRoot }) },
    {
      BENCH_CONCURRENCY: String(concurrency),
    },
  );
  starts.push(startToFirstTakeMs);
  try {
    await warmUpWorker(harness, "local", options.throughput.warmupJobs);
    const load = { jobs: options.throughput.jobs, concurrency, ceilingUrl };
    const runs = await repeat(options.repetitions, () => throughputRun(harness, "local", worker.pid, load));
    const c = `c${concurrency}`;
    figures.push(
      figure(
        `throughput.${c}`,
        `job throughput, concurrency ${concurrency}${concurrency > 1 ? " (batch take)" : ""}`,
        "jobs/s",
        runs.map((r) => r.perSecond),
      ),
      figure(
        `throughput.${c}.ceiling`,
        `  ceiling: bare undici → node:http, ${concurrency} post${concurrency > 1 ? "s" : ""} in flight`,
        "posts/s",
        runs.map((r) => r.ceiling),
      ),
      figure(
        `throughput.${c}.ratio`,
        "  ratio (paired runs)",
        "x",
        runs.map((r) => r.ratio),
      ),
      figure(
        `throughput.${c}.workerCpu`,
        "  worker CPU per job",
        "ms",
        runs.map((r) => r.workerCpu),
      ),
      figure(
        `throughput.${c}.harnessCpu`,
        "  harness CPU per job (bench process)",
        "ms",
        runs.map((r) => r.harnessCpu),
      ),
    );
  } finally {
    await worker.stop();
    await harness.close();
  }
  return figures;
}

/** `count` results of `trip(i)`, one after another. */
async function timesOf(count: number, trip: (i: number) => Promise<number>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) times.push(await trip(i));
  return times;
}

/**
 * Per-job overhead at low load: ms from `POST /run` to the result readable through the status API
 * (`/status-sync` answers the moment the job is terminal), minus the handler's own time; one job
 * at a time, p50 and p99 per run. Beside it, right after each run, its floor: the same round trips
 * through a bare relay and a bare worker (bench/relay.ts), with the same undici client.
 */
export async function measureOverhead(options: BenchOptions): Promise<Figure[]> {
  const harness = await benchHarness(["local"]);
  const { worker } = await connectWorker(harness, "local", { handler: TRIVIAL }, { BENCH_CONCURRENCY: "1" });
  const base = `${harness.url}/v2/local`;
  const headers = { authorization: `Bearer ${harness.apiKey}` };
  const dispatcher = overheadClient();
  const trip = async (n: number) => {
    const { ms, record } = await timedRoundTrip(
      dispatcher,
      base,
      headers,
      n,
      (id) => `/status-sync/${encodeURIComponent(id)}?wait=60000`,
    );
    if (record["status"] !== "COMPLETED") throw new Error(`overhead job ended ${String(record["status"])}`);
    const handlerMs = (record["output"] as { handlerMs?: number } | undefined)?.handlerMs ?? 0;
    return ms - handlerMs;
  };
  try {
    for (let i = 0; i < 20; i++) await trip(i); // warm-up
    const runs = await repeat(options.repetitions, async () => ({
      runlet: await timesOf(options.overhead.jobs, trip),
      floor: await measureRelayFloor(options.overhead.jobs),
    }));
    // p50 and p99, each beside its floor and the ratio of the two (paired runs).
    return ([50, 99] as const).flatMap((p) => {
      const at = (times: readonly number[]) => percentile(times, p);
      return [
        figure(
          `overhead.p${p}`,
          `per-job overhead p${p} (/run → result in /status)`,
          "ms",
          runs.map((r) => at(r.runlet)),
        ),
        figure(
          `overhead.p${p}.floor`,
          "  floor: bare relay and bare worker, same client",
          "ms",
          runs.map((r) => at(r.floor)),
        ),
        figure(
          `overhead.p${p}.ratio`,
          "  runlet ÷ floor (paired runs)",
          "x",
          runs.map((r) => at(r.runlet) / at(r.floor)),
        ),
      ];
    });
  } finally {
    await dispatcher.close();
    await worker.stop();
    await harness.close();
  }
}
