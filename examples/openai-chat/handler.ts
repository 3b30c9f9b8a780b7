import { setTimeout as sleep } from "node:timers/promises";
import { type ChatCompletionRequest, defineOpenAIHandler } from "runlet/openai";

/**
 * An OpenAI-compatible endpoint: the official `openai` client (or curl) talks to it through the
 * platform's `/v2/<endpoint>/openai/v1/*` routes. The "model" is a tiny deterministic stand-in
 * that answers "You said: <your words>" one word per token; runlet builds the OpenAI wire
 * (chunks, the stream, usage, errors) around what it yields.
 */

/** Words of the last user message (text parts only). */
function lastUserText(request: ChatCompletionRequest): string {
  const last = request.messages.findLast((m) => m.role === "user");
  const content = last?.content;
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join(" ");
}

/** The stand-in model: "You said: ..." word by word, `delayMs` apart, stopping when `signal` fires. */
async function* model(text: string, delayMs: number, signal: AbortSignal): AsyncGenerator<string> {
  const words = `You said: ${text}`.split(/\s+/).filter((w) => w !== "");
  for (const [i, word] of words.entries()) {
    if (delayMs > 0) await sleep(delayMs, undefined, { signal });
    yield i === 0 ? word : ` ${word}`;
  }
}

/** A body's extra `token_delay_ms` (unknown fields reach the handler): a pause per token, in ms. */
function delayOf(request: Record<string, unknown>): number {
  const ms = request["token_delay_ms"];
  return typeof ms === "number" && ms >= 0 && ms <= 1_000 ? ms : 0;
}

/** Prompt tokens, counted the stand-in's way: words. */
const countWords = (text: string): number => text.split(/\s+/).filter((w) => w !== "").length;

export default defineOpenAIHandler({
  models: ["echo-1"],
  concurrency: 4,
  async *chat(request, { signal }) {
    const text = lastUserText(request);
    yield* model(text, delayOf(request), signal);
    return { usage: { prompt_tokens: countWords(text) } };
  },
  async *completions(request, { signal }) {
    const prompt = typeof request.prompt === "string" ? request.prompt : String(request.prompt[0] ?? "");
    yield* model(prompt, delayOf(request), signal);
    return { usage: { prompt_tokens: countWords(prompt) } };
  },
  // Jobs sent to /run or /runsync (not OpenAI requests) still work on the same endpoint.
  handler: ({ input }) => ({ echo: input }),
});
