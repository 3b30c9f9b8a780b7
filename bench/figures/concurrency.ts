import { mkdtemp, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { loadLlm } from "../../examples/llm/llm.js";
import { writeTinyModel } from "../../examples/llm/tiny-model.js";
import { loadOcr, recognise } from "../../examples/ocr/ocr.js";
import { textPicture } from "../../examples/ocr/picture.js";
import { type Figure, figure } from "../stats.js";

/**
 * Concurrency with one model (docs/models.md, "Concurrency with one model"): jobs/s when 1, 2 or 4
 * jobs call the same loaded model at once, in one process, as an in-process handler with
 * `concurrency: N` does: the OCR example's one pair of onnxruntime-node sessions, and the LLM
 * example's one llama.cpp context with 4 sequences (the tiny model, one thread). Every answer is
 * checked against the one a lone call gives, so the figures also say the calls did not mix (an
 * LLM generation may differ in its later tokens: counted, see below).
 * Rounds interleave the levels, so a busy spell of the machine hits each alike.
 */

const LEVELS = [1, 2, 4] as const;
const ROUNDS = 3;
const OCR_JOBS = 8;
const LLM_JOBS = 16;
const LLM_TOKENS = 32;
const LINES = ["Hello runlet", "The quick brown fox", "Invoice 4521 paid"];

/** `jobs` calls of `once`, at most `level` at a time; jobs/s. */
async function closedLoop(jobs: number, level: number, once: () => Promise<void>): Promise<number> {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: level }, async () => {
      while (next < jobs) {
        next++;
        await once();
      }
    }),
  );
  return (jobs * 1000) / (performance.now() - t);
}

async function measure(
  name: string,
  label: string,
  jobs: number,
  once: () => Promise<void>,
  note: string,
): Promise<Figure[]> {
  await once(); // warm-up
  const runs = new Map<number, number[]>(LEVELS.map((l) => [l, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const level of LEVELS) runs.get(level)?.push(await closedLoop(jobs, level, once));
  }
  return LEVELS.map((level) =>
    figure(
      `concurrency.${name}.c${level}`,
      `${label}, ${level} at once`,
      "jobs/s",
      runs.get(level) ?? [],
      note,
    ),
  );
}

export async function measureConcurrency(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const loadBefore = loadavg()[0] ?? 0;
  const cores = cpus().length;

  const ocr = await loadOcr({ device: "cpu" });
  try {
    const picture = await textPicture(LINES);
    const expected = JSON.stringify(await recognise(ocr, picture));
    figures.push(
      ...(await measure(
        "ocr",
        "ocr: jobs/s, one pair of ORT sessions (3-line picture)",
        OCR_JOBS,
        async () => {
          const got = JSON.stringify(await recognise(ocr, picture));
          if (got !== expected) throw new Error("a concurrent OCR call read something else than a lone one");
        },
        `ORT's default intra-op threads (${cores} cores)`,
      )),
    );
  } finally {
    await ocr.release();
  }

  const dir = await mkdtemp(join(tmpdir(), "runlet-bench-concurrency-"));
  try {
    const llm = await loadLlm({
      modelPath: await writeTinyModel(join(dir, "tiny.gguf")),
      parallel: 4,
      contextSize: 512,
      threads: 1,
    });
    try {
      const messages = [{ role: "user" as const, content: "tell me a story" }];
      const generate = async () => {
        let text = "";
        const gen = llm.chat(messages, {
          maxTokens: LLM_TOKENS,
          temperature: 0,
          signal: new AbortController().signal,
        });
        for (let step = await gen.next(); step.done !== true; step = await gen.next()) text += step.value;
        return text;
      };
      const expected = await generate();
      // A sequence evaluated in one batch with others is not bit-identical to it evaluated alone
      // (another kernel shape, another order of sums), and the tiny model's random weights leave
      // near-ties, so now and then a greedy step flips a later token: 2 of 288 generations in a
      // scratch run of this loop. Those are counted, not fatal; a generation whose first half
      // differs would not be such a flip, and fails the bench.
      let generations = 0;
      let differing = 0;
      const half = Math.floor(expected.length / 2);
      figures.push(
        ...(await measure(
          "llm",
          `llm: jobs/s, one context of 4 sequences (tiny model, ${LLM_TOKENS} tokens each)`,
          LLM_JOBS,
          async () => {
            const got = await generate();
            generations++;
            if (got === expected) return;
            differing++;
            if (got.slice(0, half) !== expected.slice(0, half))
              throw new Error(
                `a concurrent generation differs from a lone one early: ${JSON.stringify(got)}`,
              );
          },
          "one llama.cpp thread; the sequences that have work are evaluated in one batch",
        )),
        figure(
          "concurrency.llm.differing",
          "llm: concurrent generations whose later tokens differ from a lone one's",
          "%",
          [(100 * differing) / Math.max(1, generations)],
          `${differing} of ${generations}: batched and lone evaluation round differently (docs/benchmarks.md)`,
        ),
      );
    } finally {
      await llm.release();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  figures.push(
    figure(
      "concurrency.loadAverage",
      "concurrency: machine's 1-min load average, section start and end",
      "load",
      [loadBefore, loadavg()[0] ?? 0],
      "other processes share the cores: above the core count, the figures are a starved machine's",
    ),
  );
  return figures;
}
