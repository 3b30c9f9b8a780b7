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

/** Most `stop` sequences a request may give (OpenAI's bound). */
export const MAX_STOP_SEQUENCES = 4;
/**
 * Most characters in one `stop` sequence: a model server turns stop texts into a matcher on its
 * main thread, so megabytes of them would stall every other request (and run it out of memory).
 */
export const MAX_STOP_CHARS = 1_024;

/** `stop`: one text, or up to {@link MAX_STOP_SEQUENCES}, each of at most {@link MAX_STOP_CHARS} characters. */
const stopSchema = nullish(
  z.union([z.string(), z.array(z.string())]).superRefine((stop, ctx) => {
    const list = typeof stop === "string" ? [stop] : stop;
    if (list.length > MAX_STOP_SEQUENCES) {
      ctx.addIssue({
        code: "custom",
        message: `at most ${MAX_STOP_SEQUENCES} stop sequences are taken, got ${list.length}`,
      });
      return;
    }
    const at = list.findIndex((s) => s.length > MAX_STOP_CHARS);
    if (at >= 0) {
      ctx.addIssue({
        code: "custom",
        message: `each stop sequence may hold at most ${MAX_STOP_CHARS} characters, ${typeof stop === "string" ? "this one" : `stop[${at}]`} holds ${list[at]?.length}`,
      });
    }
  }),
);

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

/** A call an assistant message made (`tool_calls[]`): the function's name and its arguments as JSON text. */
export const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }).optional(),
});
/** A tool call of an assistant message, as OpenAI's `ChatCompletionMessageToolCall`. */
export type ChatCompletionMessageToolCall = z.infer<typeof toolCallSchema>;

/** One chat message. */
export const chatMessageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: nullish(z.union([z.string(), z.array(contentPartSchema)])),
  name: z.string().optional(),
  tool_calls: nullish(z.array(toolCallSchema)),
  tool_call_id: z.string().optional(),
});
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/**
 * Most messages in one request. A chat template renders each message on the main thread, so
 * tens of thousands of tiny ones would stall every other request for seconds; a conversation
 * that long is over any context anyway.
 */
export const MAX_CHAT_MESSAGES = 2_048;
/** Most tools in one request (OpenAI's bound). */
export const MAX_TOOLS = 128;

/** A tool the model may call: a function, its description and its parameters' JSON schema. */
const toolSchema = z.looseObject({
  type: z.string(),
  function: z
    .looseObject({
      name: z.string().min(1),
      description: nullish(z.string()),
      parameters: nullish(z.record(z.string(), z.unknown())),
      strict: nullish(z.boolean()),
    })
    .optional(),
});
/** A tool of a request, as OpenAI's `ChatCompletionTool`. */
export type ChatCompletionTool = z.infer<typeof toolSchema>;

/** `tool_choice`: "none", "auto", "required", or one named function. */
const toolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: z.string().min(1) }) }),
]);
/** A request's `tool_choice`, as OpenAI's `ChatCompletionToolChoiceOption`. */
export type ChatCompletionToolChoice = z.infer<typeof toolChoiceSchema>;

/** `response_format`: free text, any JSON object, or JSON that follows a schema. */
const responseFormatSchema = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("text") }),
  z.looseObject({ type: z.literal("json_object") }),
  z.looseObject({
    type: z.literal("json_schema"),
    json_schema: z.looseObject({
      name: z.string().min(1),
      description: nullish(z.string()),
      schema: nullish(z.record(z.string(), z.unknown())),
      strict: nullish(z.boolean()),
    }),
  }),
]);
/** A request's `response_format`, as OpenAI's. */
export type ResponseFormat = z.infer<typeof responseFormatSchema>;

/**
 * One streamed piece of a tool call (`choices[].delta.tool_calls[]`): the first piece of a call
 * carries its `id`, `type` and `function.name`; later ones add to `function.arguments`.
 */
export interface ChatCompletionToolCallDelta {
  readonly index: number;
  readonly id?: string;
  readonly type?: "function";
  readonly function?: { readonly name?: string; readonly arguments?: string };
}

/** The body of `POST /v1/chat/completions`. */
export const chatCompletionRequestSchema = z.looseObject({
  ...common,
  messages: z.array(chatMessageSchema).min(1).max(MAX_CHAT_MESSAGES),
  max_completion_tokens: nullish(z.number().int().min(1)),
  tools: absentIfNull(z.array(toolSchema).max(MAX_TOOLS)),
  tool_choice: absentIfNull(toolChoiceSchema),
  parallel_tool_calls: absentIfNull(z.boolean()),
  response_format: absentIfNull(responseFormatSchema),
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
