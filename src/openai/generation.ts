/**
 * Turns what a chat or completions function yields (text deltas, or chunk objects) into OpenAI's
 * wire: `chat.completion.chunk` / `text_completion` frames as server-sent-event text when the
 * request streams, one aggregated response when it does not.
 */

/** Token counts a function may report; what it leaves out runlet fills in. */
export interface UsageCounts {
  /** Tokens in the prompt. @default 0 (runlet has no tokenizer) */
  readonly prompt_tokens?: number;
  /** Tokens generated. @default the number of items the function yielded */
  readonly completion_tokens?: number;
}

/** What a chat or completions generator may return when it ends. */
export interface GenerationResult {
  /** Why generation ended. @default "length" when max_tokens was reached, "tool_calls" after tool calls, else "stop" */
  readonly finish_reason?: string;
  readonly usage?: UsageCounts;
}

/** A chunk object a function yields instead of text (tool calls, logprobs, several fields at once). */
export type ChunkObject = { readonly choices?: readonly Record<string, unknown>[] } & Record<string, unknown>;

/** What a generator may return; `void` so that one without a `return` statement fits. */
// biome-ignore lint/suspicious/noConfusingVoidType: a generator with no return statement is typed as returning void
type GenerationReturn = GenerationResult | undefined | void;

/** What a chat or completions function gives back: a (possibly async) generator of deltas. */
export type Generation =
  | AsyncGenerator<string | ChunkObject, GenerationReturn, undefined>
  | Generator<string | ChunkObject, GenerationReturn, undefined>;

/** Which wire the generation speaks. */
export type GenerationKind = "chat" | "completion";

/** The facts of one request the wire needs. */
export interface GenerationRequest {
  readonly kind: GenerationKind;
  readonly id: string;
  readonly created: number;
  readonly model: string;
  /** Most items taken from the function before it is stopped with finish_reason "length". */
  readonly maxTokens: number | undefined;
  readonly includeUsage: boolean;
  readonly signal: AbortSignal;
}

/** Usage as a chat or completions answer reports it. */
export interface GenerationUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

/**
 * Pulls items from the function, counting them and stopping past max_tokens or at the job's
 * signal (for the Responses API too: responses.ts).
 */
export class GenerationRun {
  readonly #request: GenerationRequest;
  readonly #iterator: Generation;
  #count = 0;
  #result: GenerationResult | undefined;
  #hitLimit = false;
  /** A finish_reason a yielded chunk object carried. */
  chunkFinish: string | undefined;
  toolCalls = false;

  constructor(request: GenerationRequest, iterator: Generation) {
    this.#request = request;
    this.#iterator = iterator;
  }

  async *items(): AsyncGenerator<string | ChunkObject> {
    let done = false;
    try {
      for (;;) {
        const atLimit = this.#request.maxTokens !== undefined && this.#count >= this.#request.maxTokens;
        this.#request.signal.throwIfAborted();
        // At max_tokens the function is still read once more: one that honours max_tokens ends
        // there and returns its finish_reason and usage; one that does not yields an item past the
        // limit, which is dropped, and is stopped.
        const step = await this.#iterator.next();
        this.#hitLimit = atLimit;
        if (step.done === true) {
          done = true;
          this.#result = step.value ?? undefined;
          return;
        }
        if (atLimit) return;
        this.#count++;
        const item = step.value;
        if (typeof item === "object" && item !== null) this.#note(item);
        yield item;
      }
    } finally {
      // Stopped early (max_tokens, a cancel, a consumer that stopped): let the function clean up.
      if (!done) await this.#iterator.return?.(undefined);
    }
  }

  #note(item: ChunkObject): void {
    for (const choice of item.choices ?? []) {
      const finish = choice["finish_reason"];
      if (typeof finish === "string") this.chunkFinish = finish;
      const delta = choice["delta"] as { tool_calls?: unknown } | undefined;
      if (delta?.tool_calls !== undefined) this.toolCalls = true;
    }
  }

  get finishReason(): string {
    return (
      this.#result?.finish_reason ??
      this.chunkFinish ??
      (this.#hitLimit ? "length" : this.toolCalls ? "tool_calls" : "stop")
    );
  }

  usage(): GenerationUsage {
    const prompt = this.#result?.usage?.prompt_tokens ?? 0;
    const completion = this.#result?.usage?.completion_tokens ?? this.#count;
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }
}

const event = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;

/** The last event of every stream. */
export const DONE_EVENT = "data: [DONE]\n\n";

/**
 * The frames of a streamed response, as server-sent-event text, one string per frame: (chat) a
 * first chunk with the assistant role (with the first item), one chunk per yielded item, a last chunk with the
 * finish_reason, the usage chunk when `stream_options.include_usage` is set, and `[DONE]`.
 */
export async function* streamFrames(
  request: GenerationRequest,
  generation: Generation,
): AsyncGenerator<string> {
  const run = new GenerationRun(request, generation);
  const object = request.kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const base = { id: request.id, object, created: request.created, model: request.model };
  const usageNull = request.includeUsage ? { usage: null } : {};
  const chunk = (choice: Record<string, unknown>) => event({ ...base, choices: [choice], ...usageNull });
  const role = () =>
    chunk({ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null });
  // The role chunk waits for the function's first item: a function that fails before it then fails
  // the job before anything is streamed, and the client gets the error's HTTP status.
  let started = false;
  for await (const item of run.items()) {
    if (!started && request.kind === "chat") yield role();
    started = true;
    if (typeof item === "string") {
      yield chunk(
        request.kind === "chat"
          ? { index: 0, delta: { content: item }, logprobs: null, finish_reason: null }
          : { index: 0, text: item, logprobs: null, finish_reason: null },
      );
    } else {
      yield event({ ...(request.includeUsage ? { usage: null } : {}), ...item, ...base });
    }
  }
  if (!started && request.kind === "chat") yield role();
  const finish = run.finishReason;
  yield chunk(
    request.kind === "chat"
      ? { index: 0, delta: {}, logprobs: null, finish_reason: finish }
      : { index: 0, text: "", logprobs: null, finish_reason: finish },
  );
  if (request.includeUsage) yield event({ ...base, choices: [], usage: run.usage() });
  yield DONE_EVENT;
}

interface ToolCallParts {
  id: string;
  type: string;
  function: { name: string; arguments: string };
}

/** The one response of a request that does not stream: the items' text (and tool calls) joined. */
export async function aggregateResponse(
  request: GenerationRequest,
  generation: Generation,
): Promise<Record<string, unknown>> {
  const run = new GenerationRun(request, generation);
  let text = "";
  const merger = new ToolCallMerger();
  for await (const item of run.items()) {
    if (typeof item === "string") {
      text += item;
      continue;
    }
    for (const choice of item.choices ?? []) {
      if (request.kind === "completion") {
        if (typeof choice["text"] === "string") text += choice["text"];
        continue;
      }
      const delta = (choice["delta"] ?? {}) as { content?: unknown; tool_calls?: unknown };
      if (typeof delta.content === "string") text += delta.content;
      if (Array.isArray(delta.tool_calls)) merger.add(delta.tool_calls);
    }
  }
  const toolCalls = merger.calls();
  const finish = run.finishReason;
  const head = { id: request.id, object: "", created: request.created, model: request.model };
  if (request.kind === "completion") {
    return {
      ...head,
      object: "text_completion",
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
      usage: run.usage(),
    };
  }
  const message: Record<string, unknown> = {
    role: "assistant",
    content: text === "" && toolCalls.length > 0 ? null : text,
    refusal: null,
  };
  if (toolCalls.length > 0) message["tool_calls"] = toolCalls;
  return {
    ...head,
    object: "chat.completion",
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    usage: run.usage(),
  };
}

/**
 * Streamed tool-call deltas into whole calls: parts with the same `index` are one call, arguments
 * joined. The index is a key, not a position, so a sparse or huge one (a model's stray value)
 * cannot leave holes or grow an array; a delta without an integer index starts a call of its own.
 */
class ToolCallMerger {
  readonly #calls = new Map<number | object, ToolCallParts & { readonly order: number }>();

  add(deltas: readonly unknown[]): void {
    for (const raw of deltas) {
      if (typeof raw !== "object" || raw === null) continue;
      const d = raw as {
        index?: unknown;
        id?: unknown;
        type?: unknown;
        function?: { name?: unknown; arguments?: unknown };
      };
      const key = Number.isSafeInteger(d.index) ? (d.index as number) : {};
      let call = this.#calls.get(key);
      if (call === undefined) {
        const order = typeof key === "number" ? key : Number.MAX_SAFE_INTEGER;
        call = { id: "", type: "function", function: { name: "", arguments: "" }, order };
        this.#calls.set(key, call);
      }
      if (typeof d.id === "string") call.id = d.id;
      if (typeof d.type === "string") call.type = d.type;
      if (typeof d.function?.name === "string") call.function.name += d.function.name;
      if (typeof d.function?.arguments === "string") call.function.arguments += d.function.arguments;
    }
  }

  /** The calls by index (those without one after, as they came). */
  calls(): ToolCallParts[] {
    return [...this.#calls.values()]
      .sort((a, b) => a.order - b.order)
      .map(({ id, type, function: fn }) => ({ id, type, function: fn }));
  }
}
