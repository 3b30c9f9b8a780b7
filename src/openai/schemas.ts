import { z } from "zod";

/**
 * zod schemas of the OpenAI request bodies runlet/openai serves. Known fields are checked; unknown
 * fields are kept (`looseObject`), so a handler can read options OpenAI adds later or a server's
 * own extensions (`top_k`, `repetition_penalty`, ...).
 */

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/**
 * A field that may be `null` as OpenAI and vLLM take it, reaching the handler as absent: its type
 * stays `T | undefined`, so a handler's `request.tools !== undefined` still means "tools given".
 */
const absentIfNull = <T extends z.ZodType>(schema: T) =>
  schema
    .nullable()
    .optional()
    .transform((value): z.output<T> | undefined => value ?? undefined);

/** `stop`: up to 4 sequences. */
const stopSchema = nullish(z.union([z.string(), z.array(z.string()).max(4)]));

/** `stream_options`: `include_usage` adds a last chunk with the usage. */
const streamOptionsSchema = nullish(z.looseObject({ include_usage: z.boolean().optional() }));

/** Fields chat and completions share. */
const common = {
  model: z.string().min(1),
  max_tokens: nullish(z.number().int().min(1)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().min(0).max(1)),
  n: nullish(z.number().int().min(1).max(128)),
  stop: stopSchema,
  stream: nullish(z.boolean()),
  stream_options: streamOptionsSchema,
  presence_penalty: nullish(z.number().min(-2).max(2)),
  frequency_penalty: nullish(z.number().min(-2).max(2)),
  seed: nullish(z.number().int()),
  logit_bias: nullish(z.record(z.string(), z.number())),
  user: absentIfNull(z.string()),
};

/** A content part of a message (`{type: "text", text}`, `{type: "image_url", ...}`, ...). */
const contentPartSchema = z.looseObject({ type: z.string() });

/** One chat message. */
export const chatMessageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: nullish(z.union([z.string(), z.array(contentPartSchema)])),
  name: z.string().optional(),
  tool_calls: z.array(z.looseObject({ id: z.string(), type: z.string() })).optional(),
  tool_call_id: z.string().optional(),
});
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** A tool the model may call. */
const toolSchema = z.looseObject({
  type: z.string(),
  function: z.looseObject({ name: z.string().min(1), description: z.string().optional() }).optional(),
});

/** The body of `POST /v1/chat/completions`. */
export const chatCompletionRequestSchema = z.looseObject({
  ...common,
  messages: z.array(chatMessageSchema).min(1),
  max_completion_tokens: nullish(z.number().int().min(1)),
  tools: absentIfNull(z.array(toolSchema)),
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: absentIfNull(z.boolean()),
  response_format: absentIfNull(z.looseObject({ type: z.string() })),
  logprobs: nullish(z.boolean()),
  top_logprobs: nullish(z.number().int().min(0).max(20)),
});
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

/** The body of `POST /v1/completions`. */
export const completionRequestSchema = z.looseObject({
  ...common,
  prompt: z.union([
    z.string(),
    z.array(z.string()),
    z.array(z.number().int()),
    z.array(z.array(z.number().int())),
  ]),
  suffix: nullish(z.string()),
  echo: nullish(z.boolean()),
  best_of: nullish(z.number().int().min(1)),
  logprobs: nullish(z.number().int().min(0).max(5)),
});
export type CompletionRequest = z.infer<typeof completionRequestSchema>;
