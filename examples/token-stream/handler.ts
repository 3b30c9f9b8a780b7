import { setTimeout as sleep } from "node:timers/promises";
import { defineHandler } from "runlet";
import { z } from "zod";

/**
 * An LLM-shaped streaming handler: an async generator yields one token at a time, each becoming
 * a stream item a client reads from `/stream` while the job runs. Metrics (token count, time to
 * first token, throughput) ride along on the stream chunks and are logged with `Finished.`.
 */

const input = z.object({
  prompt: z.string().min(1).max(10_000),
  maxTokens: z.number().int().min(1).max(4096).default(32),
  /** Pause between tokens, standing in for a model's decoding step, in ms. */
  tokenDelayMs: z.number().int().min(0).max(1000).default(10),
});

/** A stand-in for a model: echoes the prompt back word by word. Replace with your inference call. */
async function* fakeModel(
  prompt: string,
  maxTokens: number,
  tokenDelayMs: number,
  signal: AbortSignal,
): AsyncGenerator<string> {
  const words = `You said: ${prompt}`.split(/\s+/).filter((w) => w !== "");
  for (let i = 0; i < Math.min(maxTokens, words.length); i++) {
    // The signal fires on cancel, timeout or shutdown: stop decoding at once.
    await sleep(tokenDelayMs, undefined, { signal });
    yield i === 0 ? (words[i] ?? "") : ` ${words[i]}`;
  }
}

export default defineHandler({
  input,
  concurrency: 4,
  async *handler({ input, signal, metrics }) {
    const startedMs = performance.now();
    for await (const token of fakeModel(input.prompt, input.maxTokens, input.tokenDelayMs, signal)) {
      if (metrics.get("tokens") === undefined) {
        metrics.set("timeToFirstTokenMs", Math.round(performance.now() - startedMs));
      }
      metrics.increment("tokens");
      yield token;
    }
    const seconds = (performance.now() - startedMs) / 1000;
    const tokens = metrics.get("tokens");
    if (typeof tokens === "number" && seconds > 0) {
      metrics.set("tokensPerSecond", Math.round((tokens / seconds) * 10) / 10);
    }
  },
});
