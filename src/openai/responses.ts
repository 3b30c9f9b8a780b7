import { z } from "zod";
import { JobError } from "../errors.js";
import { openAIJobError } from "./errors.js";
import { type Generation, type GenerationRequest, GenerationRun } from "./generation.js";

/**
 * OpenAI's Responses API (`POST /v1/responses`) served through a handler's `chat` function: the
 * request becomes a chat request (`instructions` a system message, `input` the messages), what
 * `chat` yields becomes the response's one output message, streamed as the Responses API's own
 * events (`response.created`, `response.output_text.delta`, ..., `response.completed`). Text in
 * and text out; what is not served (tools, stored conversations, images) is refused with the
 * parameter named (docs/openai.md, "The Responses API").
 */

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/** A content part of an input message: text only. */
const inputPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });

/**
 * One input item: a message (`type` "message" or none). `role` and `content` are checked as
 * required by {@link chatRequestOf} once the item's type is known to be a message, so an item of
 * another type (`function_call_output`) is refused naming its type, not a role it never had.
 */
const inputItemSchema = z.looseObject({
  type: z.string().optional(),
  role: z.enum(["user", "assistant", "system", "developer"]).optional(),
  content: z.union([z.string(), z.array(inputPartSchema)]).optional(),
});

/** `text.format`: plain text, or structured output (passed to `chat` as `response_format`). */
const textSchema = z.looseObject({
  format: nullish(
    z.looseObject({
      type: z.enum(["text", "json_object", "json_schema"]),
      name: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      description: z.string().optional(),
      strict: nullish(z.boolean()),
    }),
  ),
  verbosity: nullish(z.string()),
});

/** The body of `POST /v1/responses`, as far as runlet serves it; unknown fields are kept. */
export const responsesRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(inputItemSchema)]),
  instructions: nullish(z.string()),
  max_output_tokens: nullish(z.number().int().min(1)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().min(0).max(1)),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.looseObject({ include_obfuscation: z.boolean().optional() })),
  text: nullish(textSchema),
  metadata: nullish(z.record(z.string(), z.string())),
  user: nullish(z.string()),
  store: nullish(z.boolean()),
  parallel_tool_calls: nullish(z.boolean()),
  truncation: nullish(z.enum(["disabled", "auto"])),
});
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

/** What a refused parameter holds when it asks for nothing (so clients that send defaults pass). */
function asksNothing(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.values(value).every((v) => v === null || v === undefined);
  return false;
}

/** Parameters of the Responses API runlet does not serve, and why (the refusal's message). */
const REFUSED: readonly (readonly [string, string])[] = [
  ["tools", "tools are not served on /v1/responses (use /v1/chat/completions)"],
  ["previous_response_id", "responses are not stored, so a previous response cannot be continued"],
  ["conversation", "conversations are not stored"],
  ["background", "background responses are not served"],
  ["include", "no extra output is served (include)"],
  ["reasoning", "reasoning options are not served"],
  ["prompt", "stored prompt templates are not served"],
  ["top_logprobs", "logprobs are not served"],
  ["max_tool_calls", "tools are not served on /v1/responses"],
];

function refuse(message: string, param: string): never {
  throw openAIJobError(message, "invalid_request_error", { code: "unsupported_parameter", param });
}

/** OpenAI's error for a required parameter the request left out. */
function missing(param: string): JobError {
  return openAIJobError(`Missing required parameter: '${param}'.`, "invalid_request_error", {
    code: "missing_required_parameter",
    param,
  });
}

/**
 * A chat request's parameter as the Responses request named it: `messages[i]` is the input item
 * `i` (less one when `instructions` came first as a system message), `response_format` is
 * `text.format` (its `json_schema.*` fields sit in `text.format` itself), `max_tokens` is
 * `max_output_tokens`.
 */
export function responsesParamOf(param: string, request: ResponsesRequest): string {
  const message = /^messages(?:\[(\d+)\](.*))?$/.exec(param);
  if (message !== null) {
    if (message[1] === undefined || typeof request.input === "string") return "input";
    const i = Number(message[1]) - (typeof request.instructions === "string" ? 1 : 0);
    return i < 0 ? "instructions" : `input[${i}]${message[2] ?? ""}`;
  }
  if (param === "response_format" || param.startsWith("response_format.")) {
    return `text.format${param.slice("response_format".length).replace(/^\.json_schema(?=\.|$)/, "")}`;
  }
  if (param === "max_tokens") return "max_output_tokens";
  return param;
}

/**
 * `err` (the chat request's check failing) as the Responses request's error: its parameter, in
 * the field and in the message, renamed by {@link responsesParamOf}; any other error as it is.
 */
export function responsesErrorOf(err: unknown, request: ResponsesRequest): unknown {
  if (!(err instanceof JobError)) return err;
  const error = openAIErrorOfMessage(err.message);
  if (error?.param === null || error?.param === undefined) return err;
  const param = responsesParamOf(error.param, request);
  if (param === error.param) return err;
  const message = error.message.replaceAll(`'${error.param}'`, `'${param}'`);
  return openAIJobError(message, error.type, {
    code: error.code === null ? null : String(error.code),
    param,
  });
}

/**
 * The chat request a Responses request asks for: `instructions` first as a system message, then
 * the input's messages (text parts as chat text parts), the sampling options, `max_output_tokens`
 * as `max_tokens`, `text.format` as `response_format`, and any field this side does not know
 * (`seed`, `top_k`, ...) as it came.
 *
 * @throws JobError an `invalid_request_error` naming the first parameter that is not served.
 */
export function chatRequestOf(request: ResponsesRequest): Record<string, unknown> {
  for (const [param, why] of REFUSED) {
    if (!asksNothing(request[param])) refuse(why, param);
  }
  const choice = request["tool_choice"];
  if (choice !== undefined && choice !== null && choice !== "auto" && choice !== "none") {
    refuse("tools are not served on /v1/responses", "tool_choice");
  }
  if (request.text?.verbosity !== undefined && request.text.verbosity !== null) {
    refuse("text.verbosity is not served", "text.verbosity");
  }
  const messages: Record<string, unknown>[] = [];
  if (typeof request.instructions === "string") {
    messages.push({ role: "system", content: request.instructions });
  }
  if (Array.isArray(request.input) && request.input.length === 0) {
    throw openAIJobError("Invalid value for 'input': expected at least 1 item.", "invalid_request_error", {
      code: "invalid_value",
      param: "input",
    });
  }
  if (typeof request.input === "string") {
    messages.push({ role: "user", content: request.input });
  } else {
    for (const [i, item] of request.input.entries()) {
      if (item.type !== undefined && item.type !== "message") {
        refuse(`input items of type "${item.type}" are not served (messages only)`, `input[${i}].type`);
      }
      if (item.role === undefined) throw missing(`input[${i}].role`);
      if (item.content === undefined) throw missing(`input[${i}].content`);
      messages.push({ role: item.role, content: contentOf(item.content, i) });
    }
  }
  const {
    input: _input,
    instructions: _instructions,
    max_output_tokens,
    text,
    metadata: _metadata,
    store: _store,
    truncation: _truncation,
    stream_options: _streamOptions,
    parallel_tool_calls: _parallel,
    tool_choice: _choice,
    ...rest
  } = request;
  const chat: Record<string, unknown> = { ...rest, messages };
  for (const [param] of REFUSED) delete chat[param];
  if (max_output_tokens !== undefined && max_output_tokens !== null) chat["max_tokens"] = max_output_tokens;
  const format = text?.format;
  if (format?.type === "json_object") chat["response_format"] = { type: "json_object" };
  if (format?.type === "json_schema") {
    const { type: _type, ...schema } = format;
    chat["response_format"] = { type: "json_schema", json_schema: schema };
  }
  return chat;
}

/** A message's content in chat terms: text as it is, text parts as chat text parts. */
function contentOf(content: string | readonly { type: string; text?: string | undefined }[], i: number) {
  if (typeof content === "string") return content;
  return content.map((part, j) => {
    if ((part.type === "input_text" || part.type === "output_text") && typeof part.text === "string") {
      return { type: "text", text: part.text };
    }
    return refuse(
      `content parts of type "${part.type}" are not served (input_text and output_text only)`,
      `input[${i}].content[${j}].type`,
    );
  });
}

/** The facts of one Responses request the wire needs. */
export interface ResponsesWire extends Omit<GenerationRequest, "kind" | "includeUsage"> {
  readonly request: ResponsesRequest;
  /** Scrubs secrets from an error's text before the `error` event carries it to the client. */
  readonly scrub: (text: string) => string;
}

/** The text of one item `chat` yielded: a string, or a chunk object's `delta.content`. */
function textOf(item: string | { readonly choices?: readonly Record<string, unknown>[] }): string {
  if (typeof item === "string") return item;
  let text = "";
  for (const choice of item.choices ?? []) {
    const delta = choice["delta"] as { content?: unknown } | undefined;
    if (typeof delta?.content === "string") text += delta.content;
  }
  return text;
}

/**
 * An `error` event's fields for what the function threw: its OpenAI error, else a server_error;
 * its message scrubbed (the event leaves the worker as the job's error does).
 */
function errorFields(err: unknown, scrub: (text: string) => string): Record<string, unknown> {
  const own = err instanceof JobError ? openAIErrorOfMessage(err.message) : undefined;
  const found = own ?? {
    message: err instanceof Error ? err.message : String(err),
    type: "server_error",
    param: null,
    code: "job_failed",
  };
  const error = { ...found, message: scrub(found.message) };
  return {
    code: error.code === null ? null : String(error.code),
    message: error.message,
    param: error.param,
    error,
  };
}

/** The OpenAI error an openAIJobError's message holds (JSON of `{error: {...}}`). */
function openAIErrorOfMessage(
  message: string,
): { message: string; type: string; param: string | null; code: string | number | null } | undefined {
  try {
    const body = JSON.parse(message) as {
      error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown };
    };
    const e = body.error;
    if (typeof e?.message !== "string" || typeof e.type !== "string") return undefined;
    return {
      message: e.message,
      type: e.type,
      param: typeof e.param === "string" ? e.param : null,
      code: typeof e.code === "string" || typeof e.code === "number" ? e.code : null,
    };
  } catch {
    return undefined;
  }
}

/** The pieces of a response object: its head while it runs, its output and end once done. */
class ResponseShape {
  readonly #wire: ResponsesWire;
  readonly messageId: string;

  constructor(wire: ResponsesWire) {
    this.#wire = wire;
    this.messageId = `msg_${wire.id.slice("resp_".length)}`;
  }

  /** The response object: `status` and what it holds so far. */
  response(
    status: "in_progress" | "completed" | "incomplete",
    output: readonly unknown[],
    end?: { readonly finish: string; readonly usage: ReturnType<GenerationRun["usage"]> },
  ): Record<string, unknown> {
    const r = this.#wire.request;
    const reason = end === undefined ? null : incompleteReason(end.finish);
    const format = r.text?.format ?? { type: "text" };
    return {
      id: this.#wire.id,
      object: "response",
      created_at: this.#wire.created,
      status,
      background: false,
      error: null,
      incomplete_details: reason === null ? null : { reason },
      instructions: r.instructions ?? null,
      max_output_tokens: r.max_output_tokens ?? null,
      model: this.#wire.model,
      output,
      parallel_tool_calls: r.parallel_tool_calls ?? true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: r.temperature ?? 1,
      text: { format },
      tool_choice: "auto",
      tools: [],
      top_p: r.top_p ?? 1,
      truncation: "disabled",
      usage:
        end === undefined
          ? null
          : {
              input_tokens: end.usage.prompt_tokens,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: end.usage.completion_tokens,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: end.usage.total_tokens,
            },
      user: r.user ?? null,
      metadata: r.metadata ?? {},
    };
  }

  part(text: string): Record<string, unknown> {
    return { type: "output_text", text, annotations: [], logprobs: [] };
  }

  message(status: "in_progress" | "completed" | "incomplete", content: readonly unknown[]) {
    return { id: this.messageId, type: "message", status, role: "assistant", content };
  }
}

/** The Responses API's `incomplete_details.reason` for a chat finish_reason, or null when complete. */
function incompleteReason(finish: string): string | null {
  if (finish === "length") return "max_output_tokens";
  if (finish === "content_filter") return "content_filter";
  return null;
}

/** The one response of a request that does not stream. */
export async function aggregateResponsesAnswer(
  wire: ResponsesWire,
  generation: Generation,
): Promise<Record<string, unknown>> {
  const run = new GenerationRun({ ...wire, kind: "chat", includeUsage: false }, generation);
  const shape = new ResponseShape(wire);
  let text = "";
  for await (const item of run.items()) text += textOf(item);
  const finish = run.finishReason;
  const status = incompleteReason(finish) === null ? "completed" : "incomplete";
  return shape.response(status, [shape.message(status, [shape.part(text)])], { finish, usage: run.usage() });
}

/**
 * The events of a streamed response, as server-sent-event text (`event: <type>` and its `data:`
 * line, numbered by `sequence_number`): `response.created`, `response.in_progress`, the message's
 * `response.output_item.added` and `response.content_part.added` (with the first item, so a
 * function that fails before it fails the request with the error's HTTP status), one
 * `response.output_text.delta` per item, then the `.done` events and `response.completed` (or
 * `response.incomplete` at `max_output_tokens`) with the usage.
 */
export async function* streamResponsesEvents(
  wire: ResponsesWire,
  generation: Generation,
): AsyncGenerator<string> {
  const run = new GenerationRun({ ...wire, kind: "chat", includeUsage: false }, generation);
  const shape = new ResponseShape(wire);
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`;
  const at = { item_id: shape.messageId, output_index: 0, content_index: 0 };
  const head = (): string =>
    event("response.created", { response: shape.response("in_progress", []) }) +
    event("response.in_progress", { response: shape.response("in_progress", []) }) +
    event("response.output_item.added", { output_index: 0, item: shape.message("in_progress", []) }) +
    event("response.content_part.added", { ...at, part: shape.part("") });
  let started = false;
  let text = "";
  try {
    for await (const item of run.items()) {
      const delta = textOf(item);
      let frame = started ? "" : head();
      started = true;
      if (delta !== "") {
        text += delta;
        frame += event("response.output_text.delta", { ...at, delta, logprobs: [] });
      }
      if (frame !== "") yield frame;
    }
  } catch (err) {
    // Once the stream has started the client reads events, not a status: the failure is told as
    // the Responses API's `error` event (its `error` field as on every OpenAI stream, which the
    // `openai` client raises), and the job still fails with it.
    if (started && !wire.signal.aborted) yield event("error", errorFields(err, wire.scrub));
    throw err;
  }
  const finish = run.finishReason;
  const status = incompleteReason(finish) === null ? "completed" : "incomplete";
  const part = shape.part(text);
  const message = shape.message(status, [part]);
  yield (started ? "" : head()) +
    event("response.output_text.done", { ...at, text, logprobs: [] }) +
    event("response.content_part.done", { ...at, part }) +
    event("response.output_item.done", { output_index: 0, item: message }) +
    event(`response.${status}`, {
      response: shape.response(status, [message], { finish, usage: run.usage() }),
    });
}
