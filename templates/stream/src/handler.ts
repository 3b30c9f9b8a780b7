import { setTimeout as sleep } from "node:timers/promises";
import { defineHandler } from "runlet";
import { z } from "zod";

/** What a job's `input` must look like. runlet checks it before the handler runs. */
const input = z.object({
  prompt: z.string().min(1).max(10_000),
  maxTokens: z.number().int().min(1).max(4096).default(64),
});

/** A stand-in for a model that decodes one token at a time. Replace it with your inference call. */
async function* generate(prompt: string, maxTokens: number, signal: AbortSignal): AsyncGenerator<string> {
  const words = `You said: ${prompt}`.split(/\s+/).filter((w) => w !== "");
  for (let i = 0; i < Math.min(maxTokens, words.length); i++) {
    await sleep(5, undefined, { signal }); // stops at once on cancel, timeout or shutdown
    yield i === 0 ? (words[i] ?? "") : ` ${words[i]}`;
  }
}

export default defineHandler({
  input,
  concurrency: 4,
  // Each yielded value is one stream item; clients read them from /stream while the job runs.
  async *handler({ input, signal, metrics }) {
    const startedMs = performance.now();
    for await (const token of generate(input.prompt, input.maxTokens, signal)) {
      metrics.increment("tokens");
      yield token;
    }
    metrics.set("durationMs", Math.round(performance.now() - startedMs));
  },
});
