import OpenAI from "openai";
import type { Harness } from "../../dist/harness/index.js";
import type { BenchOptions } from "../options.js";
import { benchHarness, type Connected, compareWorkers, connectWorker } from "../session.js";
import { type Figure, figure, repeat, type Side } from "../stats.js";

const HANDLER = "bench/handlers/openai.ts";
/** Tokens of the short answers whose time to first token is measured. */
const TTFT_TOKENS = 10;

/** Tokens per streamed request: a tenth of the streaming bench's item count, at most 10 000. */
function tokensFor(options: BenchOptions): number {
  return Math.max(10, Math.min(10_000, Math.floor(options.stream.smallItems / 10)));
}

/** One streamed chat completion through the official client; checks every token arrived. */
async function streamOnce(harness: Harness, endpointId: string, tokens: number) {
  const client = new OpenAI({
    apiKey: harness.apiKey,
    baseURL: `${harness.url}/v2/${endpointId}/openai/v1`,
    maxRetries: 0,
  });
  const started = performance.now();
  let firstMs: number | undefined;
  let received = 0;
  const stream = await client.chat.completions.create({
    model: "bench",
    messages: [{ role: "user", content: "go" }],
    stream: true,
    tokens,
  } as OpenAI.ChatCompletionCreateParamsStreaming);
  for await (const chunk of stream) {
    const content = chunk.choices[0]?.delta.content;
    if (content === undefined || content === "") continue;
    firstMs ??= performance.now() - started;
    // Batched frames still arrive as one chunk per token: the client parses each SSE event.
    received++;
  }
  const ms = performance.now() - started;
  if (received !== tokens) throw new Error(`openai stream on ${endpointId}: ${received} of ${tokens} tokens`);
  return { tokensPerSec: tokens / (ms / 1000), ttftMs: firstMs ?? ms };
}

/**
 * Streamed tokens per second from a runlet OpenAI handler (a `runlet start` process) through the
 * harness's `/openai/v1` route to the official `openai` client, one frame per stream item
 * (`streamCoalesceMs: 0`) and batched (`streamCoalesceMs` of the streaming bench), and the time
 * from the request to the first token of a short answer.
 */
export async function measureOpenAI(options: BenchOptions): Promise<Figure[]> {
  const tokens = tokensFor(options);
  const batchMs = options.stream.coalesceMs;
  const harness = await benchHarness(["perToken", "batched"]);
  const workers: Connected[] = [];
  try {
    workers.push(await connectWorker(harness, "perToken", { handler: HANDLER }));
    workers.push(
      await connectWorker(harness, "batched", { handler: HANDLER }, { BENCH_COALESCE_MS: String(batchMs) }),
    );
    // Warm-up of both paths (JIT, connections).
    for (const ep of ["perToken", "batched"]) await streamOnce(harness, ep, Math.min(tokens, 500));
    const runs = await repeat(options.stream.repetitions, async () => ({
      perToken: await streamOnce(harness, "perToken", tokens),
      batched: await streamOnce(harness, "batched", tokens),
      // Time to first token on a short answer: on a long one the generator (which never waits)
      // has made much of the stream before the first post leaves, which says nothing of latency.
      ttftPerToken: (await streamOnce(harness, "perToken", TTFT_TOKENS)).ttftMs,
      ttftBatched: (await streamOnce(harness, "batched", TTFT_TOKENS)).ttftMs,
    }));
    const n = tokens.toLocaleString("en-US");
    return [
      figure(
        "stream.openai.perToken",
        `openai client stream, ${n} tokens, streamCoalesceMs 0`,
        "tokens/s",
        runs.map((r) => r.perToken.tokensPerSec),
      ),
      figure(
        "stream.openai.batched",
        `openai client stream, ${n} tokens, streamCoalesceMs ${batchMs}`,
        "tokens/s",
        runs.map((r) => r.batched.tokensPerSec),
      ),
      figure(
        "stream.openai.ttftPerToken",
        `openai client time to first token (${TTFT_TOKENS}-token answer), streamCoalesceMs 0`,
        "ms",
        runs.map((r) => r.ttftPerToken),
      ),
      figure(
        "stream.openai.ttftBatched",
        `openai client time to first token (${TTFT_TOKENS}-token answer), streamCoalesceMs ${batchMs}`,
        "ms",
        runs.map((r) => r.ttftBatched),
      ),
    ];
  } finally {
    await Promise.all(workers.map((w) => w.worker.stop()));
    await harness.close();
  }
}

/**
 * Streamed tokens/s of two checkouts' OpenAI handlers (`roots`, each its own
 * bench/handlers/openai.ts, one frame per token) on one harness, `rounds` streams of `tokens`
 * a side, alternating (ABBA), for `npm run bench -- --before`.
 */
export function compareOpenAI(
  roots: Readonly<Record<Side, string>>,
  tokens: number,
  rounds: number,
): Promise<Record<Side, number[]>> {
  return compareWorkers(
    roots,
    rounds,
    { handler: HANDLER, warmUp: (harness, side) => streamOnce(harness, side, Math.min(tokens, 500)) },
    async (harness, side) => (await streamOnce(harness, side, tokens)).tokensPerSec,
  );
}
