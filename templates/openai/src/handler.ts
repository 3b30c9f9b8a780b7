import { setTimeout as sleep } from "node:timers/promises";
import { type ChatCompletionRequest, defineOpenAIHandler } from "runlet/openai";

/** The text of the last user message. */
function lastUserText(request: ChatCompletionRequest): string {
  const content = request.messages.findLast((m) => m.role === "user")?.content;
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join(" ");
}

/** A stand-in for a model that decodes one token at a time. Replace it with your inference call. */
async function* generate(text: string, signal: AbortSignal): AsyncGenerator<string> {
  const words = `You said: ${text}`.split(/\s+/).filter((w) => w !== "");
  for (const [i, word] of words.entries()) {
    await sleep(5, undefined, { signal }); // stops at once on cancel, timeout or shutdown
    yield i === 0 ? word : ` ${word}`;
  }
}

export default defineOpenAIHandler({
  // What /v1/models lists; requests naming another model answer 404.
  models: ["my-model"],
  concurrency: 4,
  // Each yielded string is one token; runlet builds the OpenAI chunks, the stream and the usage.
  async *chat(request, { signal }) {
    yield* generate(lastUserText(request), signal);
  },
  async *completions(request, { signal }) {
    yield* generate(typeof request.prompt === "string" ? request.prompt : "", signal);
  },
});
