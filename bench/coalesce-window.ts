/**
 * The default stream coalescing window (issue 43, item 4), measured: for each `streamCoalesceMs`
 * a generator handler's tokens/s as fast as it yields (10 000 tokens), and the latency a client
 * reading `/stream` sees per token of a paced generator (a token every `--gap` ms, as a model
 * decodes): from the token's yield in the worker to its arrival in the client's `/stream` answer.
 * One worker per window, alternating rounds; prints one JSON line per window with medians.
 *
 *   node bin/run-ts.mjs bench/coalesce-window.ts [--windows 0,2,5,10] [--rounds 3] [--gap 10]
 */
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import type { Harness } from "../dist/harness/index.js";
import { benchHarness, connectWorker } from "./session.js";
import { median } from "./stats.js";

const { values } = parseArgs({
  options: {
    windows: { type: "string" },
    rounds: { type: "string" },
    gap: { type: "string" },
    tokens: { type: "string" },
  },
});
const windows = (values.windows ?? "0,2,5,10").split(",").map(Number);
const rounds = Number(values.rounds ?? "3");
const gapMs = Number(values.gap ?? "10");
const fastTokens = Number(values.tokens ?? "10000");
const pacedTokens = 200;

const now = () => performance.timeOrigin + performance.now();
const dispatcher = new Agent({ connections: 4 });

/** Reads a job's /stream until it ends, noting each token's arrival minus its yield time. */
async function readStream(harness: Harness, endpointId: string, jobId: string): Promise<number[]> {
  const lags: number[] = [];
  for (;;) {
    const res = await request(`${harness.url}/v2/${endpointId}/stream/${jobId}`, {
      headers: { authorization: `Bearer ${harness.apiKey}` },
      dispatcher,
    });
    const body = (await res.body.json()) as { status: string; stream?: { output: string }[] };
    const at = now();
    for (const chunk of body.stream ?? []) {
      for (const stamp of chunk.output.split(";")) if (stamp !== "") lags.push(at - Number(stamp));
    }
    if (["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(body.status)) return lags;
  }
}

const p = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))] ?? NaN;

const harness = await benchHarness(windows.map((w) => `w${w}`));
const workers = [];
for (const w of windows) {
  workers.push(
    await connectWorker(
      harness,
      `w${w}`,
      { handler: "bench/handlers/stream-paced.ts" },
      { BENCH_COALESCE_MS: String(w) },
    ),
  );
}
const results = new Map<
  number,
  { tokensPerS: number[]; lagP50: number[]; lagP99: number[]; chunks: number[] }
>();
try {
  for (const w of windows) results.set(w, { tokensPerS: [], lagP50: [], lagP99: [], chunks: [] });
  for (let round = 0; round < rounds; round++) {
    for (const w of round % 2 === 0 ? windows : [...windows].reverse()) {
      const r = results.get(w)!;
      const started = performance.now();
      const fast = harness.enqueue(`w${w}`, { input: { items: fastTokens, gapMs: 0 } });
      const done = await harness.waitForJob(fast, { timeoutMs: 600_000 });
      r.tokensPerS.push(fastTokens / ((performance.now() - started) / 1000));
      r.chunks.push(done.stream.length);
      const paced = harness.enqueue(`w${w}`, { input: { items: pacedTokens, gapMs } });
      const lags = await readStream(harness, `w${w}`, paced);
      r.lagP50.push(p(lags, 0.5));
      r.lagP99.push(p(lags, 0.99));
    }
  }
  for (const w of windows) {
    const r = results.get(w)!;
    process.stdout.write(
      `${JSON.stringify({
        streamCoalesceMs: w,
        tokensPerSecond: Math.round(median(r.tokensPerS)),
        chunksFor10kTokens: median(r.chunks),
        lagP50Ms: Number(median(r.lagP50).toFixed(1)),
        lagP99Ms: Number(median(r.lagP99).toFixed(1)),
        gapMs,
        rounds,
      })}\n`,
    );
  }
} finally {
  await Promise.all(workers.map((c) => c.worker.stop()));
  await harness.close();
  await dispatcher.close();
}
