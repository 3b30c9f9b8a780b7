import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { loadOcr, recognise } from "../../examples/ocr/ocr.js";
import { textPicture } from "../../examples/ocr/picture.js";
import { bundleHandler } from "../../src/cli/bundle.js";
import { WORKER_NODE_FLAGS } from "../../src/cli/dockerfile.js";
import { copyExternals } from "../../src/cli/externals.js";
import { startHarness } from "../../src/harness/index.js";
import { measureColdStart } from "../cold-start.js";
import { readOcrImageRecord } from "../image-record.js";
import type { BenchOptions } from "../options.js";
import { type Figure, figure, percentile } from "../stats.js";
import { ROOT } from "../worker-process.js";

/**
 * The OCR example (PaddleOCR on onnxruntime-node, CPU provider) as a deployed worker: built
 * with runlet build (externals in dist/node_modules), started as the image starts it. Figures:
 * start → first job-take with the model loaded (the handler's setup loads it before the
 * first take), the idle worker's RSS with the model loaded, per-job latency p50/p99 through the
 * harness, and pictures/s in-process at recogniser batch size 1 against the others; the
 * start-up phases the worker's `worker ready` line reports (the model loads in `setup`); the
 * image's size from the last `npm run test:image` (bench/image-sizes.json, which it writes); and
 * the machine's load average over the run, since other processes share its cores.
 */

const HANDLER = join(ROOT, "examples", "ocr", "handler.ts");
/** What the latency jobs read: three lines, as test/examples/ocr.test.ts. */
const LINES = ["Hello runlet", "The quick brown fox", "Invoice 4521 paid"];
/** What the batching runs read: a page of twelve lines, so the recogniser has crops to batch. */
const PAGE = Array.from({ length: 12 }, (_, i) => `Line ${i + 1}: the quick brown fox jumps`);

export async function measureOcr(options: BenchOptions): Promise<Figure[]> {
  const o = options.ocr;
  const dir = await mkdtemp(join(tmpdir(), "runlet-bench-ocr-"));
  const figures: Figure[] = [];
  const loadBefore = loadavg()[0] ?? 0;
  try {
    const built = await bundleHandler({ handlerPath: HANDLER, outDir: join(dir, "dist") });
    await copyExternals(
      built.externals.map((e) => e.name),
      dirname(HANDLER),
      join(dir, "dist"),
    );
    const cold = await measureColdStart({
      bundlePath: built.bundlePath,
      runs: o.starts,
      idleMs: 2_000,
      timeoutMs: 120_000,
    });
    figures.push(
      figure(
        "ocr.firstTake",
        "ocr: worker start → first job-take, model loaded (bundle)",
        "ms",
        cold.coldStartMsRuns,
      ),
      // The phases of that start, as the worker's `worker ready` line reports them (docs/worker.md).
      ...phaseFigures(cold.phasesMsRuns),
      figure(
        "ocr.idleRss",
        "ocr: idle worker RSS, model loaded",
        "MiB",
        cold.idleRssBytesRuns.map((b) => b / 1_048_576),
      ),
    );
    figures.push(...(await latency(built.bundlePath, dir, o.jobs)));
    figures.push(...(await batching(o.batchSizes, o.pictures)));
    figures.push(...(await imageSize()));
    const loadAfter = loadavg()[0] ?? 0;
    figures.push(
      figure(
        "ocr.loadAverage",
        "ocr: machine's 1-min load average, section start and end",
        "load",
        [loadBefore, loadAfter],
        "other processes share the cores: above the core count, the figures are a starved worker's",
      ),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return figures;
}

/** One figure per start-up phase present in every run (`runlet`, `setup`, `total`, …), ms. */
function phaseFigures(runs: ReadonlyArray<Readonly<Record<string, number>>>): Figure[] {
  const names = Object.keys(runs[0] ?? {}).filter((name) => runs.every((r) => r[name] !== undefined));
  return names.map((name) =>
    figure(
      `ocr.phase.${name}`,
      `ocr: start-up phase ${name}${name === "setup" ? " (the model loads)" : name === "total" ? " (process start → ready)" : ""}`,
      "ms",
      runs.map((r) => r[name] ?? Number.NaN),
    ),
  );
}

/** The OCR starter's image as the last `npm run test:image` measured it, or a line saying there is none. */
async function imageSize(): Promise<Figure[]> {
  const record = await readOcrImageRecord();
  if (record === undefined) {
    return [
      figure(
        "ocr.imageMB",
        "ocr: image size",
        "MB",
        [Number.NaN],
        "not measured: run `npm run test:image -- --only ocr` (buildah), which writes bench/image-sizes.json",
      ),
    ];
  }
  const from = `from npm run test:image on ${record.measuredAt} (not rebuilt by the bench), final stage from ${record.base}`;
  return [
    figure("ocr.imageMB", "ocr: image size", "MB", [record.imageMB], from),
    figure("ocr.imageApp", "ocr: /app in the image", "MiB", [record.appBytes / 1_048_576]),
    figure(
      "ocr.imageOrt",
      "ocr: onnxruntime-node in the image (this platform)",
      "MiB",
      [record.ortImageBytes / 1_048_576],
      `${(record.ortInstalledBytes / 1_048_576).toFixed(1)} MiB as npm installs it (every platform)`,
    ),
  ];
}

/** Jobs one after another through the harness to the bundle as the image runs it: each job's enqueue → COMPLETED. */
async function latency(bundle: string, cwd: string, jobs: number): Promise<Figure[]> {
  await using harness = await startHarness({ takeTimeoutMs: 5_000, endpoints: [{ id: "ocr" }] });
  const image = (await textPicture(LINES)).toString("base64");
  const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, bundle], {
    cwd,
    env: {
      PATH: process.env["PATH"] ?? "",
      NODE_ENV: "production",
      NODE_OPTIONS: "--enable-source-maps",
      ...harness.workerEnv("ocr"),
      RUNPOD_ENDPOINT_ID: "ocr",
    },
    stdio: "ignore",
  });
  try {
    const ms: number[] = [];
    let measuredFrom = performance.now();
    for (let i = 0; i < jobs + 3; i++) {
      if (i === 3) measuredFrom = performance.now();
      const t = performance.now();
      const job = await harness.waitForJob(harness.enqueue("ocr", { input: { image } }), {
        timeoutMs: 120_000,
      });
      if (job.status !== "COMPLETED") throw new Error(`ocr job ${job.status}: ${job.error}`);
      if (i >= 3) ms.push(performance.now() - t); // the first three warm ORT up
    }
    return [
      figure("ocr.jobP50", "ocr: one job (3 lines, 670×230 px), p50", "ms", [percentile(ms, 50)]),
      figure("ocr.jobP99", "ocr: one job, p99", "ms", [percentile(ms, 99)], `${ms.length} jobs in a row`),
      figure(
        "ocr.jobsPerSec",
        "ocr: jobs/s, one at a time through the harness (CPU default: recogniser batch 1)",
        "jobs/s",
        [(ms.length * 1000) / (performance.now() - measuredFrom)],
      ),
    ];
  } finally {
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("close", resolve));
  }
}

/** Pictures/s in-process at each recogniser batch size, on a 12-line page. */
async function batching(sizes: readonly number[], pictures: number): Promise<Figure[]> {
  const model = await loadOcr({ device: "cpu" });
  try {
    const page = await textPicture(PAGE, { fontSize: 24 });
    await recognise(model, page, { batchSize: 1 }); // warm-up
    const perSize = new Map<number, number[]>();
    // Interleaved rounds, so a busy spell of the machine hits every size alike.
    for (let round = 0; round < pictures; round++) {
      for (const size of sizes) {
        const t = performance.now();
        const lines = await recognise(model, page, { batchSize: size });
        if (lines.length !== PAGE.length) throw new Error(`read ${lines.length} of ${PAGE.length} lines`);
        perSize.set(size, [...(perSize.get(size) ?? []), 1000 / (performance.now() - t)]);
      }
    }
    const figures = sizes.map((size) =>
      figure(
        `ocr.batch${size}`,
        `ocr: pictures/s, 12-line page, recogniser batch ${size}`,
        "jobs/s",
        perSize.get(size) ?? [],
      ),
    );
    const base = figures[0]?.median ?? 0;
    const best = figures.reduce((a, b) => (b.median > a.median ? b : a));
    figures.push(
      figure(
        "ocr.bestBatch",
        `ocr: best batch size (${best.label.replace(/.*batch /, "")}) over batch 1`,
        "x",
        [best.median / base],
      ),
    );
    return figures;
  } finally {
    await model.release();
  }
}
