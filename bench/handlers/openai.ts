import { defineOpenAIHandler } from "../../src/openai/index.js";

/**
 * The bench's OpenAI handler: a chat request's extra `tokens` field says how many short tokens
 * to yield, as fast as the generator can. BENCH_COALESCE_MS turns on `streamCoalesceMs` for the
 * batched variant.
 */
const streamCoalesceMs = Number(process.env["BENCH_COALESCE_MS"] ?? "0");

export default defineOpenAIHandler({
  models: ["bench"],
  streamCoalesceMs,
  *chat(request) {
    const tokens = typeof request["tokens"] === "number" ? request["tokens"] : 0;
    for (let i = 0; i < tokens; i++) yield `tok${i} `;
  },
});
