/** Every size and repetition of `npm run bench`, in one object so the smoke test can shrink them. */
export interface BenchOptions {
  /** Runs per figure; each figure is the median of these, with min and max. @default 5 */
  readonly repetitions: number;
  /** The load-balancing path (bench/figures/load-balancing.ts). */
  readonly loadBalancing: {
    /** Requests in flight measured (the worker's concurrency is the same). */
    readonly levels: readonly number[];
    /** Requests per run. */
    readonly requests: number;
    /** Starts of the bundled echo worker for its health cold start (0: none, nor its build). */
    readonly coldStarts: number;
  };
  readonly throughput: {
    /** Handler concurrency levels measured (batch take is used whenever more than one slot is free). */
    readonly concurrency: readonly number[];
    /** Jobs per run. */
    readonly jobs: number;
    /** Jobs run before measuring, twice, with a pause between in which the worker loads undici's Pool (JIT, connections: warmUpWorker). */
    readonly warmupJobs: number;
  };
  readonly overhead: {
    /** Jobs per run, one at a time (low load). */
    readonly jobs: number;
  };
  readonly stream: {
    /** Runs of the streaming figures (the 100 000-item run is the bench's slowest part). */
    readonly repetitions: number;
    /** Short strings yielded by the small-item job. */
    readonly smallItems: number;
    /** Size of the single large string item, bytes. */
    readonly largeBytes: number;
    /** `streamCoalesceMs` of the coalesced variant, ms. */
    readonly coalesceMs: number;
  };
  readonly s3: {
    /** Body uploaded and downloaded, bytes. */
    readonly bytes: number;
  };
  readonly memory: {
    /** Fresh workers measured (each runs every job). */
    readonly repetitions: number;
    /**
     * Jobs run first, before the RSS the growth counts from: the worker's one-time warm-up (undici's
     * Pool, loaded once the worker is idle after a job, and V8's first compilations), reported apart.
     */
    readonly warmupJobs: number;
    /** Jobs run after the warm-up before RSS is read again. */
    readonly jobs: number;
    /** Handler concurrency of the memory run. */
    readonly concurrency: number;
    /** Pause before each RSS reading, ms. */
    readonly settleMs: number;
    /** Largest RSS growth over `jobs` (after − warm) that still passes, bytes. */
    readonly growthBoundBytes: number;
    /**
     * Largest growth of the heap in use after a forced GC over the second half of the jobs, bytes:
     * what a per-job leak would show (RSS also grows while V8 and the allocator warm up, and then
     * levels off, so RSS alone cannot tell a leak).
     */
    readonly heapGrowthBoundBytes: number;
  };
  readonly batching: {
    /** Each `maxSize` measured (examples/batched-embeddings' cost model). */
    readonly sizes: readonly number[];
    /** Jobs queued at once per run. */
    readonly jobs: number;
    /** `maxWaitMs` of every level, ms. */
    readonly maxWaitMs: number;
    /** Lone jobs per run of the window figure, sent one at a time. */
    readonly loneJobs: number;
  };
  readonly soak: {
    /** How long the real-time soak runs, ms. */
    readonly durationMs: number;
    /** How often the worker is probed (RSS, heap after GC, handles, event-loop delay), ms. */
    readonly sampleMs: number;
  };
  readonly ocr: {
    /** Worker starts measured (start → first take with the model loaded, idle RSS); 0 leaves the OCR figures out. */
    readonly starts: number;
    /** Jobs one after another for the latency percentiles (after 3 warm-up jobs). */
    readonly jobs: number;
    /** Recogniser batch sizes compared (the first is the baseline). */
    readonly batchSizes: readonly number[];
    /** Pictures read at each batch size. */
    readonly pictures: number;
  };
  readonly warmCache: {
    /** Input of the derived file a cold setup builds (deflated at level 9), bytes. */
    readonly derivedInputBytes: number;
  };
  readonly telemetry: {
    /** Fresh workers started with telemetry off and as many on, alternating (start → first take, idle RSS). */
    readonly starts: number;
  };
  /** Call `bench/cold-start.ts` when it exists. */
  readonly coldStart: boolean;
  /**
   * `--before <checkout>`: that checkout's worker against this one's, alternating A B, B A on one
   * harness per section (bench/compare.ts).
   */
  readonly compare: {
    /** Rounds of each section; each side runs once a round. */
    readonly rounds: number;
    /** Bundled worker starts of one side per round (spawn → first take, CPU, idle RSS). */
    readonly coldStartsPerRound: number;
    /** Handler concurrency levels of the job figures. */
    readonly concurrency: readonly number[];
    /** Trivial jobs per run of the job figures. */
    readonly jobs: number;
    /** Jobs each worker runs before its level's rounds. */
    readonly warmupJobs: number;
    /** Short strings per stream run. */
    readonly streamItems: number;
    /** Tokens per OpenAI stream (one frame each). */
    readonly openaiTokens: number;
    /** Size of the one large string item, bytes. */
    readonly largeBytes: number;
    /** Fresh workers of each side for the idle RSS after 20 jobs. */
    readonly idleStarts: number;
    /** Idle wait before the first RSS reading, ms (twice as long after the jobs). */
    readonly idleSettleMs: number;
  };
}

const MiB = 1_048_576;

/** The full bench: a few minutes on 2 cores. */
export const FULL_OPTIONS: BenchOptions = Object.freeze({
  repetitions: 5,
  loadBalancing: { levels: [1, 8, 64], requests: 2_000, coldStarts: 5 },
  throughput: { concurrency: [1, 8, 64], jobs: 2_000, warmupJobs: 5_000 },
  overhead: { jobs: 200 },
  stream: { repetitions: 3, smallItems: 100_000, largeBytes: 100_000_000, coalesceMs: 5 },
  s3: { bytes: 50_000_000 },
  memory: {
    repetitions: 3,
    warmupJobs: 1_000,
    jobs: 10_000,
    concurrency: 8,
    settleMs: 1_000,
    growthBoundBytes: 20 * MiB,
    heapGrowthBoundBytes: 2 * MiB,
  },
  batching: { sizes: [1, 8, 32], jobs: 512, maxWaitMs: 10, loneJobs: 20 },
  soak: { durationMs: 4 * 60_000, sampleMs: 15_000 },
  ocr: { starts: 5, jobs: 100, batchSizes: [1, 2, 4, 8, 16], pictures: 8 },
  warmCache: { derivedInputBytes: 128 * MiB },
  telemetry: { starts: 9 },
  coldStart: true,
  compare: {
    rounds: 6,
    coldStartsPerRound: 3,
    concurrency: [1, 8, 64],
    jobs: 2_000,
    warmupJobs: 5_000,
    streamItems: 20_000,
    openaiTokens: 5_000,
    largeBytes: 100_000_000,
    idleStarts: 4,
    idleSettleMs: 1_000,
  },
});

/** Tiny sizes (`--quick`, the smoke test): checks the bench runs, measures nothing meaningful. */
export const QUICK_OPTIONS: BenchOptions = Object.freeze({
  repetitions: 2,
  loadBalancing: { levels: [1, 8], requests: 20, coldStarts: 0 },
  throughput: { concurrency: [1, 8], jobs: 20, warmupJobs: 5 },
  overhead: { jobs: 10 },
  stream: { repetitions: 2, smallItems: 200, largeBytes: 2 * MiB, coalesceMs: 5 },
  s3: { bytes: MiB },
  memory: {
    repetitions: 2,
    warmupJobs: 10,
    jobs: 100,
    concurrency: 8,
    settleMs: 100,
    // A hundred jobs are all warm-up: the quick run only checks the figures come out.
    growthBoundBytes: 256 * MiB,
    heapGrowthBoundBytes: 32 * MiB,
  },
  batching: { sizes: [1, 8, 32], jobs: 16, maxWaitMs: 10, loneJobs: 2 },
  // Seconds, not minutes: the quick run only checks the soak's figures come out.
  soak: { durationMs: 2_000, sampleMs: 1_000 },
  // The real model takes minutes on 2 cores: the quick run leaves it out (`--only ocr` runs it).
  ocr: { starts: 0, jobs: 0, batchSizes: [], pictures: 0 },
  warmCache: { derivedInputBytes: 2 * MiB },
  telemetry: { starts: 2 },
  coldStart: false,
  compare: {
    rounds: 1,
    coldStartsPerRound: 1,
    concurrency: [1, 8],
    jobs: 20,
    warmupJobs: 5,
    streamItems: 200,
    openaiTokens: 20,
    largeBytes: 2 * MiB,
    idleStarts: 1,
    idleSettleMs: 100,
  },
});
