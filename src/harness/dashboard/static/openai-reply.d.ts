// Types of openai-reply.js, which the page loads as it is (the tests import it too).

/** An OpenAI job's reply, assembled. */
export interface OpenAIReply {
  text: string;
  toolCalls: Array<{ id: string | null; name: string; arguments: string } | undefined>;
  finishReason: string | null;
  usage: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | null;
  model: string | null;
  error: string | null;
  events: number;
}

/** The OpenAI route of a job's detail, or null when the job is not an OpenAI request. */
export function openAIRouteOf(job: unknown): string | null;

/** The reply from a job's streamed text (its `data:` events) or, when it did not stream, its output. */
export function openAIReplyOf(streamText: string, output: unknown): OpenAIReply | null;
