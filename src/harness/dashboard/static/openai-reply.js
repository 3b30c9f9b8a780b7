// An OpenAI job's reply as a person reads it: the text, the tool calls, why it finished and the
// token usage, assembled from the streamed `data: {…}` events or read from the one response
// (docs/openai.md). The raw stream stays on the page beside it.

/** Tool calls kept per reply (a runaway stream must not grow the page without end). */
const MAX_TOOL_CALLS = 64;

/** The OpenAI route of a job (`/v1/chat/completions`, …), or null when the job is not an OpenAI request. */
export function openAIRouteOf(job) {
  const route = job?.request?.input?.openai_route;
  return typeof route === "string" ? route : null;
}

function emptyReply() {
  return { text: "", toolCalls: [], finishReason: null, usage: null, model: null, error: null, events: 0 };
}

/** Adds one chat or completions object (a stream chunk or the whole response) to `reply`. */
function absorb(reply, obj) {
  if (obj === null || typeof obj !== "object") return;
  if (typeof obj.model === "string") reply.model = obj.model;
  if (obj.usage && typeof obj.usage === "object") reply.usage = obj.usage;
  if (obj.error && typeof obj.error === "object")
    reply.error = obj.error.message ?? JSON.stringify(obj.error);
  for (const choice of Array.isArray(obj.choices) ? obj.choices : []) {
    if (choice.index !== undefined && choice.index !== 0) continue;
    const part = choice.delta ?? choice.message ?? {};
    if (typeof part.content === "string") reply.text += part.content;
    if (typeof choice.text === "string") reply.text += choice.text;
    for (const call of Array.isArray(part.tool_calls) ? part.tool_calls : []) {
      const index = typeof call.index === "number" ? call.index : reply.toolCalls.length;
      if (index >= MAX_TOOL_CALLS) continue;
      reply.toolCalls[index] ??= { id: null, name: "", arguments: "" };
      const held = reply.toolCalls[index];
      if (typeof call.id === "string") held.id = call.id;
      if (typeof call.function?.name === "string") held.name += call.function.name;
      if (typeof call.function?.arguments === "string") held.arguments += call.function.arguments;
    }
    if (typeof choice.finish_reason === "string") reply.finishReason = choice.finish_reason;
  }
}

/**
 * The reply of an OpenAI job from its streamed text (the `data:` events joined in order) or, for a
 * request that did not stream, its output. Null when there is nothing to read yet.
 */
export function openAIReplyOf(streamText, output) {
  const reply = emptyReply();
  if (streamText !== "") {
    for (const line of streamText.split("\n")) {
      if (!line.startsWith("data: ")) continue;
      const data = line.slice(6).trim();
      if (data === "[DONE]") continue;
      try {
        absorb(reply, JSON.parse(data));
        reply.events++;
      } catch {
        // A frame cut short (the job still streams, or a slice is missing): the rest still reads.
      }
    }
    return reply.events === 0 ? null : reply;
  }
  if (output !== undefined && output !== null && typeof output === "object" && !Array.isArray(output)) {
    absorb(reply, output);
    return reply;
  }
  return null;
}
