import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { checkBeforeTree, measureCompare } from "./compare.js";
import { measureBatching } from "./figures/batching.js";
import { numericLeaves, runColdStart } from "./figures/cold-start-glue.js";
import { measureLoadBalancing } from "./figures/load-balancing.js";
import { measureMemory } from "./figures/memory.js";
import { measureOpenAI } from "./figures/openai.js";
import { measureS3 } from "./figures/s3.js";
import { measureSoak } from "./figures/soak.js";
import { measureStreaming } from "./figures/streaming.js";
import { measureTelemetry } from "./figures/telemetry.js";
import { measureOverhead, measureThroughput } from "./figures/throughput.js";
import { measureWarmCache } from "./figures/warm-cache.js";
import { describeMachine } from "./machine.js";
import { type BenchOptions, FULL_OPTIONS, QUICK_OPTIONS } from "./options.js";
import type { BenchResults } from "./results.js";
import { type Figure, figure } from "./stats.js";
import { formatTable } from "./table.js";
import { ROOT } from "./worker-process.js";

export type { BenchResults } from "./results.js";

/** The OCR figures, loaded only when run: importing them loads onnxruntime-node and sharp. */
async function measureOcr(options: BenchOptions): Promise<Figure[]> {
  return (await import("./figures/ocr.js")).measureOcr(options);
}

/** The LLM and one-model concurrency figures, loaded only when run (node-llama-cpp, onnxruntime-node). */
async function measureLlm(): Promise<Figure[]> {
  return (await import("./figures/llm.js")).measureLlm();
}
async function measureConcurrency(): Promise<Figure[]> {
  return (await import("./figures/concurrency.js")).measureConcurrency();
}

/**
 * Runs every figure with `options` and returns the results (writes nothing); with `before` (a
 * checkout checked by checkBeforeTree), then that checkout's worker against this one's.
 */
export async function runBench(
  options: BenchOptions,
  mode: "full" | "quick",
  progress: (line: string) => void = () => {},
  before?: string,
): Promise<BenchResults> {
  // A bad before tree is refused before the figures, not after them.
  if (before !== undefined) checkBeforeTree(before);
  const startedAt = new Date();
  const t0 = performance.now();
  const figures: Figure[] = [];
  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    progress(`bench: ${name}…`);
    const s = performance.now();
    const out = await fn();
    progress(`bench: ${name} done in ${((performance.now() - s) / 1000).toFixed(1)} s`);
    return out;
  };
  const throughput = await step("job throughput", () => measureThroughput(options));
  figures.push(...throughput.figures);
  figures.push(
    figure(
      "start.firstTake",
      "worker process start → first job-take (runlet start, TS sources)",
      "ms",
      throughput.startToFirstTakeMs,
    ),
  );
  figures.push(...(await step("per-job overhead", () => measureOverhead(options))));
  figures.push(...(await step("streaming", () => measureStreaming(options))));
  figures.push(...(await step("OpenAI streaming", () => measureOpenAI(options))));
  figures.push(...(await step("load-balancing path", () => measureLoadBalancing(options))));
  figures.push(...(await step("S3", () => measureS3(options))));
  figures.push(...(await step("batching", () => measureBatching(options))));
  const memory = await step("memory", () => measureMemory(options));
  figures.push(...memory.figures);
  figures.push(...(await step("telemetry", () => measureTelemetry(options))));
  figures.push(...(await step("real-time soak", () => measureSoak(options))));
  if (options.ocr.starts > 0)
    figures.push(...(await step("OCR model (examples/ocr)", () => measureOcr(options))));
  if (mode === "full") {
    figures.push(...(await step("LLM (examples/llm)", measureLlm)));
    figures.push(...(await step("concurrency with one model", measureConcurrency)));
  }
  figures.push(...(await step("warm cache", () => measureWarmCache(options))));
  let coldStart: BenchResults["coldStart"] = { available: false, reason: "skipped (--quick)" };
  if (options.coldStart) {
    const cold = await step("cold start", () => runColdStart());
    coldStart = cold.available ? { ...cold, leaves: numericLeaves(cold.result) } : cold;
  }
  const compare = before === undefined ? undefined : await measureCompare(before, options.compare, progress);
  return {
    schema: 1,
    mode,
    machine: describeMachine(startedAt),
    options,
    figures,
    memoryWithinBound: memory.withinBound,
    coldStart,
    durationMs: Math.round(performance.now() - t0),
    ...(compare === undefined ? {} : { compare }),
  };
}

const HELP = `Usage: npm run bench [-- --quick] [-- --out <file>] [-- --before <checkout>]

Measures job throughput, per-job overhead, streaming, S3, batching, worker memory, a real-time
soak (mixed jobs for a few minutes: slopes of RSS, heap, handles, event-loop delay), the warm
cache's cold and warm start-up, and cold start, prints a table and writes the results as JSON (docs/benchmarks.md says what each figure is).

  --quick            tiny sizes: checks the bench runs, measures nothing meaningful
  --only batching    only the batching figures (the table is printed; JSON only with --out)
  --only worker      only the worker's figures (job throughput against its ceilings, per-job overhead)
  --only ocr         only the OCR model's figures (examples/ocr: start, RSS, latency, batch sizes)
  --only llm         only the LLM's figures (examples/llm: start, RSS, time to first token, tokens/s)
  --only concurrency only jobs/s at 1, 2 and 4 at once on one OCR model and one llama.cpp context
  --only telemetry   only the telemetry figures (start → first take and idle RSS, off and on)
  --only lb          only the load-balancing path (requests/s at 1, 8 and 64 against a bare
                     node:http server; the bundled echo worker's health cold start)
  --only compare     only the comparison of --before (which it needs)
  --before <dir>     after the figures, another checkout's worker (its dist/ built, node_modules
                     there) against this one's, alternating A B, B A on one harness per section:
                     bundled start → first take and idle RSS, worker CPU per job and jobs/s ÷
                     ceiling at c1/c8/c64, stream items/s and tokens/s, one 100 MB item, idle RSS
                     after 20 jobs; a table figure | before | this checkout | change, and
                     "compare" in the JSON (about 6–8 minutes more on 2 cores)
  --out <file>       where to write the JSON   default: bench/results.json
`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean" },
      out: { type: "string" },
      only: { type: "string" },
      before: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) {
    process.stdout.write(HELP);
    return 0;
  }
  const quick = values.quick === true;
  // A bad --before is refused here, before anything is measured.
  let before: string | undefined;
  if (values.before !== undefined) {
    if (values.only !== undefined && values.only !== "compare") {
      process.stderr.write(
        `--before goes with the whole bench or --only compare, not --only ${values.only}\n`,
      );
      return 2;
    }
    try {
      before = checkBeforeTree(values.before);
    } catch (err) {
      process.stderr.write(`${(err as Error).message}\n`);
      return 2;
    }
  }
  if (values.only !== undefined) return runOnly(values.only, quick, values.out, before);
  const out = resolve(values.out ?? join(ROOT, "bench", "results.json"));
  const results = await runBench(
    quick ? QUICK_OPTIONS : FULL_OPTIONS,
    quick ? "quick" : "full",
    (line) => process.stderr.write(`${line}\n`),
    before,
  );
  // The file this run replaces: its cold start is printed as the run before (none when it is unreadable).
  const previous = await readFile(out, "utf8").then(
    (text) => JSON.parse(text) as BenchResults,
    () => undefined,
  );
  await writeFile(out, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`${formatTable(results, previous)}\n\nwritten to ${out}\n`);
  return results.memoryWithinBound ? 0 : 1;
}

/** `--only batching|ocr|telemetry|…`: that section alone, with the same table (and JSON when `--out` names a file). */
async function runOnly(
  section: string,
  quick: boolean,
  out: string | undefined,
  before: string | undefined,
): Promise<number> {
  if (section === "compare") {
    if (before === undefined) {
      process.stderr.write(`--only compare needs --before <checkout>\n${HELP}`);
      return 2;
    }
    return runCompareOnly(before, quick, out);
  }
  const sections: Record<string, (o: BenchOptions) => Promise<Figure[]>> = {
    batching: measureBatching,
    worker: async (o) => [...(await measureThroughput(o)).figures, ...(await measureOverhead(o))],
    ocr: measureOcr,
    llm: measureLlm,
    concurrency: measureConcurrency,
    telemetry: measureTelemetry,
    lb: measureLoadBalancing,
  };
  const measure = sections[section];
  if (measure === undefined) {
    process.stderr.write(
      `--only takes "batching", "worker", "ocr", "llm", "concurrency", "telemetry", "lb" or "compare", got ${JSON.stringify(section)}\n${HELP}`,
    );
    return 2;
  }
  // The OCR figures have no quick sizes: `--only ocr` always measures them in full.
  const options = quick && section !== "ocr" ? QUICK_OPTIONS : FULL_OPTIONS;
  const startedAt = new Date();
  const t0 = performance.now();
  const results: BenchResults = {
    schema: 1,
    mode: quick ? "quick" : "full",
    machine: describeMachine(startedAt),
    options,
    figures: await measure(options),
    memoryWithinBound: true,
    coldStart: { available: false, reason: `skipped (--only ${section})` },
    durationMs: 0,
  };
  const done = { ...results, durationMs: Math.round(performance.now() - t0) };
  if (out !== undefined) await writeFile(resolve(out), `${JSON.stringify(done, null, 2)}\n`);
  process.stdout.write(`${formatTable(done)}\n`);
  return 0;
}

/** `--only compare --before <dir>`: the comparison alone, its table (and JSON with `--out`). */
async function runCompareOnly(before: string, quick: boolean, out: string | undefined): Promise<number> {
  const options = quick ? QUICK_OPTIONS : FULL_OPTIONS;
  const startedAt = new Date();
  const compare = await measureCompare(before, options.compare, (line) => process.stderr.write(`${line}\n`));
  const results: BenchResults = {
    schema: 1,
    mode: quick ? "quick" : "full",
    machine: describeMachine(startedAt),
    options,
    figures: [],
    memoryWithinBound: true,
    coldStart: { available: false, reason: "skipped (--only compare)" },
    durationMs: compare.durationMs,
    compare,
  };
  if (out !== undefined) await writeFile(resolve(out), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`${formatTable(results)}\n`);
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(
        `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exitCode = 1;
    },
  );
}
