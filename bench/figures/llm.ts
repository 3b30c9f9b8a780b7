import { spawn } from "node:child_process";
import { mkdir, readFile, rm } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { writeTinyModel } from "../../examples/llm/tiny-model.js";
import { bundleHandler } from "../../src/cli/bundle.js";
import { WORKER_NODE_FLAGS } from "../../src/cli/dockerfile.js";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { type Figure, figure } from "../stats.js";
import { ROOT } from "../worker-process.js";

/**
 * The LLM example (a GGUF model on llama.cpp's CPU build, node-llama-cpp) as a deployed worker:
 * its bundle started as the image starts it, the model the tiny random llama the example writes
 * (two layers, 64 wide: llama.cpp's own costs, not a real model's). Figures: worker start →
 * first job-take with the model loaded, idle RSS, time to the first token of a streamed chat
 * completion through the harness's /openai/v1 route, and with twice as many streams as
 * sequences (the waiting ones' first token), tokens/s of one stream and of four at once
 * on one context (four sequences, batched by llama.cpp), and four at once with two threads
 * instead of one (llama.cpp's threads spin while they wait: on a shared machine, one is faster).
 */

const HANDLER = join(ROOT, "examples", "llm", "handler.ts");
/** Inside the repository, so the bundle imports node-llama-cpp from its node_modules without a 700 MB copy. */
const WORK = join(ROOT, "node_modules", ".cache", "runlet-bench-llm");
const STARTS = 3;
const TTFT_REQUESTS = 10;
const STREAM_TOKENS = 256;
/** The two-thread comparison's streams: short, since spinning threads on busy cores crawl. */
const SHORT_TOKENS = 32;
/** The worker's sequences (LLM_PARALLEL). */
const PARALLEL = 4;
/** Rounds of 2 × PARALLEL streams at once, and each one's tokens. */
const QUEUED_ROUNDS = 5;
const QUEUED_TOKENS = 64;

export async function measureLlm(): Promise<Figure[]> {
  await rm(WORK, { recursive: true, force: true });
  await mkdir(WORK, { recursive: true });
  const loadBefore = loadavg()[0] ?? 0;
  try {
    const model = await writeTinyModel(join(WORK, "tiny.gguf"));
    const built = await bundleHandler({
      handlerPath: HANDLER,
      outDir: join(WORK, "dist"),
      externals: ["node-llama-cpp"],
    });
    await using harness = await startHarness({ takeTimeoutMs: 5_000, endpoints: [{ id: "llm" }] });
    const starts: number[] = [];
    const rss: number[] = [];
    for (let i = 0; i < STARTS; i++) {
      const w = await startWorker(harness, built.bundlePath, model, `start-${i}`, "1");
      starts.push(w.firstTakeMs);
      await sleep(2_000);
      rss.push(await rssMiB(w.pid));
      await w.stop();
    }
    const figures = [
      figure("llm.firstTake", "llm: worker start → first job-take, tiny model loaded (bundle)", "ms", starts),
      figure("llm.idleRss", "llm: idle worker RSS, tiny model loaded, 4 sequences", "MiB", rss),
    ];
    const one = await startWorker(harness, built.bundlePath, model, "stream-1", "1");
    try {
      const ttft: number[] = [];
      for (let i = 0; i < TTFT_REQUESTS + 1; i++) {
        const r = await stream(harness, 8);
        if (i > 0) ttft.push(r.firstTokenMs); // the first request warms the path up
      }
      figures.push(
        figure(
          "llm.ttft",
          "llm: time to first token, streamed chat completion (harness → client)",
          "ms",
          ttft,
        ),
      );
      const single = await stream(harness, STREAM_TOKENS);
      figures.push(
        figure("llm.tokensPerSec1", `llm: tokens/s, one stream of ${STREAM_TOKENS}`, "tok/s", [
          single.tokensPerSec,
        ]),
      );
      figures.push(...(await twiceTheSequences(harness)));
      figures.push(...(await fourAtOnce(harness, "llm.tokensPerSec4", "one thread", STREAM_TOKENS)));
      figures.push(...(await fourAtOnce(harness, "llm.tokensPerSec4Short", "one thread", SHORT_TOKENS)));
    } finally {
      await one.stop();
    }
    const two = await startWorker(harness, built.bundlePath, model, "stream-2", "2");
    try {
      figures.push(...(await fourAtOnce(harness, "llm.tokensPerSec4Threads2", "two threads", SHORT_TOKENS)));
    } finally {
      await two.stop();
    }
    figures.push(
      figure(
        "llm.loadAverage",
        "llm: machine's 1-min load average, section start and end",
        "load",
        [loadBefore, loadavg()[0] ?? 0],
        "other processes share the cores: above the core count, the figures are a starved worker's",
      ),
    );
    return figures;
  } finally {
    await rm(WORK, { recursive: true, force: true });
  }
}

/**
 * Time to the first token with twice as many streams as the worker has sequences (8 on 4): the
 * first four start at once, the other four wait for a sequence to be freed. Each round's streams
 * are sorted by first-token time; the faster half and the slower half are reported apart.
 */
async function twiceTheSequences(harness: Harness): Promise<Figure[]> {
  const started: number[] = [];
  const waited: number[] = [];
  for (let round = 0; round < QUEUED_ROUNDS; round++) {
    const runs = await Promise.all(
      Array.from({ length: 2 * PARALLEL }, () => stream(harness, QUEUED_TOKENS)),
    );
    const firsts = runs.map((r) => r.firstTokenMs).sort((a, b) => a - b);
    started.push(...firsts.slice(0, PARALLEL));
    waited.push(...firsts.slice(PARALLEL));
  }
  return [
    figure(
      "llm.ttft2x.first",
      `llm: time to first token, ${2 * PARALLEL} streams of ${QUEUED_TOKENS} at once on ${PARALLEL} sequences: the faster half`,
      "ms",
      started,
    ),
    figure(
      "llm.ttft2x.queued",
      `llm: time to first token, ${2 * PARALLEL} streams of ${QUEUED_TOKENS} at once on ${PARALLEL} sequences: the slower half (they wait for a sequence)`,
      "ms",
      waited,
      "a waiting stream's first token comes after one of the first half's streams ends: about their length plus its own first token",
    ),
  ];
}

/** Four streams at once on one context: their summed tokens/s, and each stream's. */
async function fourAtOnce(harness: Harness, id: string, threads: string, tokens: number): Promise<Figure[]> {
  const t = performance.now();
  const runs = await Promise.all([0, 1, 2, 3].map(() => stream(harness, tokens)));
  const total = runs.reduce((sum, r) => sum + r.tokens, 0);
  return [
    figure(
      id,
      `llm: tokens/s, 4 streams of ${tokens} at once on one context, ${threads}, all together`,
      "tok/s",
      [(total * 1000) / (performance.now() - t)],
    ),
    figure(
      `${id}.each`,
      `llm: tokens/s of each of those 4 streams (${tokens} tokens, ${threads})`,
      "tok/s",
      runs.map((r) => r.tokensPerSec),
    ),
  ];
}

interface Started {
  readonly pid: number;
  readonly firstTakeMs: number;
  stop(): Promise<void>;
}

/** Spawns the bundle as the image runs it and waits for its first job-take. */
async function startWorker(
  harness: Harness,
  bundle: string,
  model: string,
  podId: string,
  threads: string,
): Promise<Started> {
  const started = performance.now();
  const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, bundle], {
    cwd: WORK,
    env: {
      PATH: process.env["PATH"] ?? "",
      NODE_ENV: "production",
      NODE_OPTIONS: "--enable-source-maps",
      ...harness.workerEnv("llm", { podId }),
      RUNPOD_ENDPOINT_ID: "llm",
      // As bench/worker-process.ts: no built-in fitness checks (their network check leaves loopback).
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
      LLM_MODEL: model,
      LLM_MODEL_ID: "tiny",
      LLM_PARALLEL: String(PARALLEL),
      LLM_CONTEXT_SIZE: "1024",
      LLM_THREADS: threads,
    },
    stdio: "ignore",
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const stop = async () => {
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const deadline = performance.now() + 120_000;
    const isTake = (route: string) => route === "job-take" || route === "job-take-batch";
    while (!harness.requests().some((r) => isTake(r.route) && r.path.endsWith(`/${podId}`))) {
      if (child.exitCode !== null)
        throw new Error(`the llm worker exited with ${child.exitCode} before its first take`);
      if (performance.now() > deadline) throw new Error("the llm worker took no job within 120 s");
      await sleep(10);
    }
    return { pid: child.pid ?? 0, firstTakeMs: performance.now() - started, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1] ?? Number.NaN) / 1024;
}

/** One streamed chat completion of `maxTokens` tokens: time to the first content delta, tokens/s. */
async function stream(
  harness: Harness,
  maxTokens: number,
): Promise<{ firstTokenMs: number; tokens: number; tokensPerSec: number }> {
  const t = performance.now();
  const res = await fetch(`${harness.url}/v2/llm/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${harness.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "tiny",
      messages: [{ role: "user", content: "tell me a story" }],
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (res.status !== 200 || res.body === null) throw new Error(`chat completion answered ${res.status}`);
  let first = Number.NaN;
  let tokens = 0;
  let pending = "";
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    pending += decoder.decode(bytes, { stream: true });
    const events = pending.split("\n\n");
    pending = events.pop() ?? "";
    for (const e of events) {
      if (!e.startsWith("data: {")) continue;
      const chunk = JSON.parse(e.slice(6)) as {
        choices: { delta?: { content?: string } }[];
        usage?: { completion_tokens: number } | null;
      };
      if (Number.isNaN(first) && (chunk.choices[0]?.delta?.content ?? "") !== "")
        first = performance.now() - t;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  const ms = performance.now() - t;
  if (tokens !== maxTokens) throw new Error(`expected ${maxTokens} tokens, the usage says ${tokens}`);
  return { firstTokenMs: first, tokens, tokensPerSec: (tokens * 1000) / ms };
}
