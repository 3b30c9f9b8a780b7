import { createHash, randomInt } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  type ChatHistoryItem,
  type ChatModelFunctionCall,
  type ChatModelFunctions,
  type ChatWrapper,
  type GbnfJsonSchema,
  getLlama,
  type Llama,
  LlamaChat,
  LlamaCompletion,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGrammar,
  LlamaLogLevel,
  type LlamaModel,
  resolveChatWrapper,
  type Token,
} from "node-llama-cpp";

/**
 * A GGUF model on llama.cpp (node-llama-cpp), loaded once and shared by concurrent generations:
 * one context holds `parallel` sequences, each generation takes one, and llama.cpp evaluates
 * the sequences that have work in one batch (continuous batching). No runlet in this file.
 */

/** Where the model runs: "cuda" (the CUDA build of llama.cpp, layers on the GPU) or "cpu". */
export type Device = "cuda" | "cpu";

/** Options of {@link loadLlm}. */
export interface LoadLlmOptions {
  /** The GGUF file. */
  readonly modelPath: string;
  /**
   * "auto": CUDA when its build loads, else the CPU, and say why; "cuda": the CUDA build or an
   * error (a GPU worker that would run on the CPU); "cpu". Nothing is ever compiled or downloaded
   * (`build: "never"`). @default "auto"
   */
  readonly gpu?: "auto" | "cuda" | "cpu";
  /** Generations at once: the context's sequences. @default 4 */
  readonly parallel?: number;
  /** Tokens each sequence holds (prompt and answer), at most what the model was trained on. @default 4096 */
  readonly contextSize?: number;
  /**
   * CPU threads llama.cpp computes with. Its threads wait for each other by spinning, so more
   * threads than free cores is far slower than fewer (docs/models.md). @default llama.cpp's: the
   * machine's math cores
   */
  readonly threads?: number;
  /** llama.cpp's warnings and errors go here. @default dropped */
  readonly onLog?: (level: "error" | "warn", message: string) => void;
}

/** How a generation is sampled and bounded (OpenAI's fields, in llama.cpp's terms). */
export interface GenerateOptions {
  /** Most tokens generated, capped at what the context has left. @default what the context has left */
  readonly maxTokens?: number;
  /** 0 picks the likeliest token every time. @default 1 */
  readonly temperature?: number;
  readonly topP?: number;
  /** Makes a sampled generation repeatable. @default a fresh random one for each generation */
  readonly seed?: number;
  /** Generation stops before any of these texts; they are not part of the answer. */
  readonly stop?: readonly string[];
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  /** Stops the generation (the answer so far stands). */
  readonly signal: AbortSignal;
}

/** A function the model may call: its name, what it does, its parameters' JSON schema. */
export interface Tool {
  readonly name: string;
  readonly description?: string;
  /** A JSON schema of the arguments (node-llama-cpp's subset: its grammar makes the call follow it). */
  readonly parameters?: Readonly<Record<string, unknown>>;
}

/** How a chat generation may answer besides text. */
export interface ChatOptions extends GenerateOptions {
  /** Functions the model may call. */
  readonly tools?: readonly Tool[];
  /**
   * "auto": the model answers or calls tools, as it chooses; "required": it calls one (a grammar
   * makes it); `{ name }`: it calls that one; "none": it answers in text. @default "auto"
   */
  readonly toolChoice?: "auto" | "none" | "required" | { readonly name: string };
  /** More than one call in an answer. @default true */
  readonly parallelToolCalls?: boolean;
  /** The answer's form, enforced by a grammar: any JSON object, or JSON that follows `schema`. @default free text */
  readonly format?: { readonly type: "json" } | { readonly type: "json_schema"; readonly schema: object };
}

/** A piece of a tool call as it streams: the first piece of a call names it, the rest add to its arguments. */
export interface ToolCallPiece {
  readonly toolCall: {
    /** Which call of the answer (0, 1, ...). */
    readonly index: number;
    /** Only on a call's first piece. */
    readonly name?: string;
    /** The next part of the arguments' JSON text. */
    readonly arguments: string;
  };
}

/** What a chat generation streams: answer text, or a piece of a tool call. */
export type ChatPiece = string | ToolCallPiece;

/** What a generation returns when it ends. */
export interface GenerationEnd {
  /**
   * "length" when it stopped at maxTokens or the end of the context, "tool_calls" after tool
   * calls, else "stop" (end of the answer, a stop text, the signal).
   */
  readonly finishReason: "length" | "stop" | "tool_calls";
  /** The prompt's tokens as the model reads it (the chat template and tool descriptions included). */
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** A call an assistant message made, and what the tool answered (the `tool` message for it). */
export interface ToolCallRecord {
  readonly name: string;
  /** The arguments (parsed JSON, or the text when it does not parse). */
  readonly arguments: unknown;
  readonly result: string;
}

/** One chat message, as the model's chat template takes it. */
export interface Message {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
  /** An assistant message's tool calls, each with its result. */
  readonly toolCalls?: readonly ToolCallRecord[];
}

/**
 * A request the model cannot take as it is: `code` is OpenAI's ("context_length_exceeded",
 * "invalid_value"), `param` the request field at fault.
 */
export class LlmRequestError extends Error {
  override readonly name = "LlmRequestError";
  readonly code: string;
  readonly param: string;
  constructor(message: string, code: string, param: string) {
    super(message);
    this.code = code;
    this.param = param;
  }
}

/**
 * Characters a prompt may hold per token of the context. No tokenizer packs more into a token
 * on real text, so a prompt over this is over the context without being rendered or tokenized
 * (both run on the main thread, and would stall every other generation).
 */
export const MAX_CHARS_PER_TOKEN = 16;

/** Most characters of a `json_schema` or a tool's parameters schema (its grammar is built on the main thread). */
export const MAX_SCHEMA_CHARS = 65_536;

/** A loaded model: `chat` and `complete` stream text; `release` frees its memory. */
export interface Llm {
  readonly device: Device;
  /** Why it runs where it runs ("CUDA build loaded", "no CUDA build loads here: ..."). */
  readonly deviceReason: string;
  readonly parallel: number;
  readonly contextSize: number;
  /** The chat template node-llama-cpp chose for the model ("ChatML", "Llama3_1", "JinjaTemplate", ...). */
  readonly chatTemplate: string;
  /**
   * Streams the answer to `messages`. Throws {@link LlmRequestError} at the first step, before
   * anything is generated, when the prompt is over the context or a schema cannot be followed.
   */
  chat(messages: readonly Message[], options: ChatOptions): AsyncGenerator<ChatPiece, GenerationEnd>;
  complete(prompt: string, options: GenerateOptions): AsyncGenerator<string, GenerationEnd>;
  release(): Promise<void>;
}

/** Loads a GGUF model with llama.cpp: the binary for `gpu`, the weights, one context of `parallel` sequences. */
export async function loadLlm(options: LoadLlmOptions): Promise<Llm> {
  const { modelPath, gpu = "auto", parallel = 4, onLog } = options;
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 64) {
    throw new RangeError(`parallel must be an integer from 1 to 64, got ${parallel}`);
  }
  await checkGguf(modelPath);
  const common = {
    build: "never" as const,
    skipDownload: true,
    progressLogs: false as const,
    logLevel: LlamaLogLevel.warn,
    logger: (level: LlamaLogLevel, message: string) => {
      if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) onLog?.("error", message);
      else if (level === LlamaLogLevel.warn) onLog?.("warn", message);
    },
  };
  let llama: Llama;
  let deviceReason: string;
  if (gpu === "cpu") {
    llama = await getLlama({ ...common, gpu: false });
    deviceReason = "the CPU was asked for";
  } else if (gpu === "cuda") {
    // Only the CUDA build: it throws when that build does not load (no driver, no CUDA runtime).
    llama = await getLlama({ ...common, gpu: "cuda" });
    deviceReason = "the CUDA build loaded";
  } else {
    try {
      llama = await getLlama({ ...common, gpu: "cuda" });
      deviceReason = "the CUDA build loaded";
    } catch (err) {
      llama = await getLlama({ ...common, gpu: false });
      deviceReason = `the CUDA build does not load here: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`;
    }
  }
  const device: Device = llama.gpu === "cuda" ? "cuda" : "cpu";
  let model: LlamaModel | undefined;
  try {
    model = await llama.loadModel({ modelPath });
    const contextSize = Math.min(options.contextSize ?? 4096, model.trainContextSize);
    const context = await model.createContext({
      sequences: parallel,
      contextSize,
      ...(options.threads === undefined ? {} : { threads: options.threads }),
    });
    return new LoadedLlm(llama, model, context, resolveChatWrapper(model), device, deviceReason, parallel);
  } catch (err) {
    await model?.dispose();
    await llama.dispose();
    throw err;
  }
}

/** Refuses a file that is missing or not GGUF before llama.cpp reads it (its errors say less). */
async function checkGguf(path: string): Promise<void> {
  const file = await open(path, "r").catch((err: NodeJS.ErrnoException) => {
    throw new Error(`the model file ${path} cannot be opened (${err.code ?? err.message})`);
  });
  try {
    const head = Buffer.alloc(4);
    await file.read(head, 0, 4, 0);
    if (head.toString("latin1") !== "GGUF")
      throw new Error(`${path} is not a GGUF file (it does not start with "GGUF")`);
  } finally {
    await file.close();
  }
}

/** A queue between llama.cpp's callbacks and a generator. */
class Channel<T> {
  readonly #items: T[] = [];
  #wake: (() => void) | undefined;
  #ended = false;

  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }
  async *drain(): AsyncGenerator<T> {
    for (;;) {
      if (this.#items.length > 0) {
        yield this.#items.shift() as T;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}

/** What a run of node-llama-cpp ends with: its stop reason, and whether tool calls were made. */
interface RunEnd {
  readonly stopReason: string;
  readonly toolCalls?: boolean;
}
type Run<T> = (sequence: LlamaContextSequence, callbacks: Callbacks<T>) => Promise<RunEnd>;
interface Callbacks<T> {
  readonly push: (item: T) => void;
  readonly onToken: (tokens: readonly unknown[]) => void;
  readonly signal: AbortSignal;
  /** Most tokens to generate: the request's bound, capped at what the context has left. */
  readonly maxTokens: number;
  readonly seed: number;
}

/** A prompt ready to run: its token count, and what it needs besides. */
interface Prepared {
  readonly promptTokens: number;
}

class LoadedLlm implements Llm {
  readonly #llama: Llama;
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;
  readonly #wrapper: ChatWrapper;
  /**
   * The context's sequences, made once: a generation takes one and gives it back, straight to
   * the next waiting generation. (Disposing a sequence and getting a new one waits for the
   * context's lock, which the other sequences' batches hold: a waiting request saw no free
   * sequence then, and waited a whole further generation.) A sequence keeps its last tokens,
   * so a next prompt with the same beginning evaluates only the rest.
   */
  readonly #free: LlamaContextSequence[];
  /** Generations waiting for a free sequence, in order. */
  readonly #waiting: ((sequence: LlamaContextSequence) => void)[] = [];
  /** Grammars of the JSON schemas asked for, by their text (building one costs main-thread time). */
  readonly #grammars = new Map<string, Promise<LlamaGrammar>>();
  #released: Promise<void> | undefined;
  readonly device: Device;
  readonly deviceReason: string;
  readonly parallel: number;
  readonly contextSize: number;
  readonly chatTemplate: string;

  constructor(
    llama: Llama,
    model: LlamaModel,
    context: LlamaContext,
    wrapper: ChatWrapper,
    device: Device,
    deviceReason: string,
    parallel: number,
  ) {
    this.#llama = llama;
    this.#model = model;
    this.#context = context;
    this.#wrapper = wrapper;
    this.device = device;
    this.deviceReason = deviceReason;
    this.parallel = parallel;
    this.contextSize = context.contextSize;
    this.chatTemplate = wrapper.wrapperName;
    // A shift of one token: llama.cpp's completion keeps a prompt whole up to the context less the
    // shift, and a prompt over the context is refused here before it runs, never cut.
    this.#free = Array.from({ length: parallel }, () => context.getSequence({ contextShift: { size: 1 } }));
  }

  chat(messages: readonly Message[], options: ChatOptions): AsyncGenerator<ChatPiece, GenerationEnd> {
    return this.#chat(messages, options);
  }

  async *#chat(messages: readonly Message[], options: ChatOptions): AsyncGenerator<ChatPiece, GenerationEnd> {
    const tools = options.tools ?? [];
    const choice = tools.length === 0 ? "none" : (options.toolChoice ?? "auto");
    const named = typeof choice === "object" ? tools.find((t) => t.name === choice.name) : undefined;
    if (typeof choice === "object" && named === undefined) {
      throw new LlmRequestError(
        `tool_choice names the function ${JSON.stringify(choice.name)}, which is not among the tools`,
        "invalid_value",
        "tool_choice",
      );
    }
    // "required" / a named function: the answer is the call's JSON, made by a grammar; the tools
    // are described in a system message, since node-llama-cpp takes a grammar or functions, not both.
    const forced =
      choice === "required" || named !== undefined ? (named === undefined ? tools : [named]) : [];
    if (forced.length > 0 && options.format !== undefined) {
      throw new LlmRequestError(
        "response_format cannot be combined with a tool_choice that forces a call",
        "invalid_value",
        "response_format",
      );
    }
    // Before anything is rendered, tokenized or turned into a grammar (all on the main thread).
    this.#checkChars(
      messages.reduce((n, m) => n + m.content.length + JSON.stringify(m.toolCalls ?? []).length, 0) +
        (tools.length === 0 ? 0 : JSON.stringify(tools).length),
      tools.length === 0 ? "messages" : "messages and tools",
      "messages",
    );
    const functions = choice === "auto" ? await this.#functions(tools) : undefined;
    const grammar =
      forced.length > 0
        ? await this.#grammar(callSchema(forced), "tools")
        : options.format === undefined
          ? undefined
          : options.format.type === "json"
            ? await this.#jsonGrammar()
            : await this.#grammar(options.format.schema, "response_format.json_schema.schema");
    const history: ChatHistoryItem[] = [];
    if (forced.length > 0) history.push({ type: "system", text: describeCall(forced) });
    for (const m of messages) {
      if (m.role === "assistant") {
        const response: (string | ChatModelFunctionCall)[] = m.content === "" ? [] : [m.content];
        for (const call of m.toolCalls ?? []) {
          response.push({
            type: "functionCall",
            name: call.name,
            params: call.arguments,
            result: call.result,
          });
        }
        history.push({ type: "model", response });
      } else history.push({ type: m.role, text: m.content });
    }
    // The answer to write: an empty model turn at the end, as node-llama-cpp's chat session does.
    history.push({ type: "model", response: [] });
    const { contextText } = this.#wrapper.generateContextState({
      chatHistory: history,
      ...(functions === undefined ? {} : { availableFunctions: functions, documentFunctionParams: true }),
    });
    const prepared = this.#check(contextText.tokenize(this.#model.tokenizer).length, "messages");
    let callIndex = -1;
    const pieces: AsyncGenerator<ChatPiece, GenerationEnd> = this.#generate<ChatPiece>(
      options,
      prepared,
      async (sequence, { push, onToken, signal, maxTokens, seed }) => {
        const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: this.#wrapper });
        const common = {
          ...sampling(options),
          maxTokens,
          seed,
          onToken,
          signal,
          stopOnAbortSignal: true,
        };
        try {
          if (functions !== undefined) {
            const seen = new Set<number>();
            const result = await chat.generateResponse(history, {
              ...common,
              onTextChunk: (text) => {
                if (text !== "") push(text);
              },
              functions,
              documentFunctionParams: true,
              ...(options.parallelToolCalls === false ? { maxParallelFunctionCalls: 1 } : {}),
              onFunctionCallParamsChunk: ({ callIndex: index, functionName, paramsChunk }) => {
                const first = !seen.has(index);
                seen.add(index);
                if (first || paramsChunk !== "") {
                  push({
                    toolCall: { index, ...(first ? { name: functionName } : {}), arguments: paramsChunk },
                  });
                }
              },
            });
            return {
              stopReason: result.metadata.stopReason,
              toolCalls: (result.functionCalls ?? []).length > 0,
            };
          }
          // A forced call with one function streams its arguments as they come; with several, the
          // call's name is inside the JSON, so the call goes out whole at the end.
          let text = "";
          const result = await chat.generateResponse(history, {
            ...common,
            ...(grammar === undefined ? {} : { grammar }),
            onTextChunk: (chunk) => {
              if (chunk === "") return;
              if (forced.length === 0) push(chunk);
              else if (forced.length === 1) {
                push({
                  toolCall: {
                    index: 0,
                    ...(callIndex < 0 ? { name: (forced[0] as Tool).name } : {}),
                    arguments: chunk,
                  },
                });
                callIndex = 0;
              } else text += chunk;
            },
          });
          if (forced.length > 1 && text !== "") {
            const call = parseCall(text);
            push({ toolCall: { index: 0, name: call.name, arguments: call.arguments } });
            callIndex = 0;
          }
          return { stopReason: result.metadata.stopReason, toolCalls: forced.length > 0 };
        } finally {
          chat.dispose({ disposeSequence: false });
        }
      },
    );
    return yield* pieces;
  }

  complete(prompt: string, options: GenerateOptions): AsyncGenerator<string, GenerationEnd> {
    return this.#complete(prompt, options);
  }

  async *#complete(prompt: string, options: GenerateOptions): AsyncGenerator<string, GenerationEnd> {
    this.#checkChars(prompt.length, "prompt");
    // As node-llama-cpp's completion tokenizes it: the first token, then the text.
    const bos = resolveBos(this.#model);
    const tokens = this.#model.tokenize(prompt, false, bos === undefined ? undefined : "trimLeadingSpace");
    const prepared = this.#check(tokens.length + (bos === undefined ? 0 : 1), "prompt");
    return yield* this.#generate<string>(options, prepared, async (sequence, callbacks) => {
      const completion = new LlamaCompletion({ contextSequence: sequence });
      try {
        const result = await completion.generateCompletionWithMeta(tokens, {
          ...sampling(options),
          maxTokens: callbacks.maxTokens,
          seed: callbacks.seed,
          // Its default cuts a prompt to 90 % of the context; one over the context is refused above.
          contextShiftSize: 1,
          onToken: callbacks.onToken,
          signal: callbacks.signal,
          onTextChunk: (text) => {
            if (text !== "") callbacks.push(text);
          },
          stopOnAbortSignal: true,
        });
        return result.metadata;
      } finally {
        completion.dispose({ disposeSequence: false });
      }
    });
  }

  /** Refuses a prompt that holds more characters than any tokenizer fits in the context, before rendering it. */
  #checkChars(chars: number, what: string, param = what): void {
    const most = this.contextSize * MAX_CHARS_PER_TOKEN;
    if (chars > most) {
      throw new LlmRequestError(
        `This model's context holds ${this.contextSize} tokens; the ${what} hold ${chars} characters, over the ${most} that could fit (${MAX_CHARS_PER_TOKEN} a token). Shorten the ${what}.`,
        "context_length_exceeded",
        param,
      );
    }
  }

  /**
   * Refuses a prompt the context cannot hold with room for one token of answer: the model would
   * otherwise see it cut, and say nothing about it. One token of the context stays free, as
   * node-llama-cpp keeps it.
   */
  #check(promptTokens: number, param: string): Prepared {
    if (promptTokens + 2 > this.contextSize) {
      throw new LlmRequestError(
        `This model's context holds ${this.contextSize} tokens; the ${param} take ${promptTokens}, leaving no room for an answer (at most ${this.contextSize - 2} fit). Shorten the ${param}.`,
        "context_length_exceeded",
        param,
      );
    }
    return { promptTokens };
  }

  /** The tools as node-llama-cpp's functions, each schema checked (its grammar built) once. */
  async #functions(tools: readonly Tool[]): Promise<ChatModelFunctions | undefined> {
    if (tools.length === 0) return undefined;
    const functions: Record<string, ChatModelFunctions[string]> = {};
    for (const [at, tool] of tools.entries()) {
      if (tool.parameters !== undefined)
        await this.#grammar(tool.parameters, `tools[${at}].function.parameters`);
      functions[tool.name] = {
        ...(tool.description === undefined ? {} : { description: tool.description }),
        ...(tool.parameters === undefined ? {} : { params: tool.parameters as GbnfJsonSchema }),
      };
    }
    return functions;
  }

  /** The grammar that makes the answer follow `schema`; a schema it cannot follow is refused, naming `param`. */
  async #grammar(schema: object, param: string): Promise<LlamaGrammar> {
    const text = JSON.stringify(schema);
    if (text.length > MAX_SCHEMA_CHARS) {
      throw new LlmRequestError(
        `the schema holds ${text.length} characters, over the limit of ${MAX_SCHEMA_CHARS}`,
        "invalid_value",
        param,
      );
    }
    let grammar = this.#grammars.get(text);
    if (grammar === undefined) {
      // A client's schema: node-llama-cpp checks it as it builds the grammar (and throws on what it cannot follow).
      const llama = this.#llama;
      grammar = Promise.resolve().then(() => llama.createGrammarForJsonSchema(schema as never));
      grammar.catch(() => this.#grammars.delete(text));
      // A bounded memo: the last 64 schemas.
      if (this.#grammars.size >= 64) this.#grammars.delete(this.#grammars.keys().next().value as string);
      this.#grammars.set(text, grammar);
    }
    try {
      return await grammar;
    } catch (err) {
      throw new LlmRequestError(
        `this JSON schema cannot be turned into a grammar: ${err instanceof Error ? err.message : String(err)}`,
        "invalid_value",
        param,
      );
    }
  }

  #jsonGrammar(): Promise<LlamaGrammar> {
    let grammar = this.#grammars.get("json");
    if (grammar === undefined) {
      grammar = this.#llama.getGrammarFor("json");
      this.#grammars.set("json", grammar);
    }
    return grammar;
  }

  /** Takes a sequence, runs one generation on it, streams what it makes, gives the sequence back. */
  async *#generate<T>(
    options: GenerateOptions,
    prepared: Prepared,
    run: Run<T>,
  ): AsyncGenerator<T, GenerationEnd> {
    const { promptTokens } = prepared;
    // What the context has left after the prompt (one token kept free): the bound when the request
    // gives none, and the cap of one that asks for more.
    const room = this.contextSize - promptTokens - 1;
    const maxTokens = Math.min(options.maxTokens ?? room, room);
    // No seed: a fresh one for each generation (node-llama-cpp's own is the current second).
    const seed = options.seed ?? randomInt(0, 2 ** 32);
    const sequence = await this.#acquire(options.signal);
    // Aborted when the consumer stops early (max_tokens taken, a job-stop, a client gone).
    const stop = new AbortController();
    const signal = AbortSignal.any([options.signal, stop.signal]);
    const channel = new Channel<T>();
    let completionTokens = 0;
    const done = run(sequence, {
      signal,
      maxTokens,
      seed,
      push: (item) => channel.push(item),
      onToken: (tokens) => {
        completionTokens += tokens.length;
      },
    }).finally(() => channel.end());
    // Settled whatever happens below, so no rejection goes unhandled.
    done.catch(() => undefined);
    try {
      yield* channel.drain();
      const { stopReason, toolCalls } = await done;
      return {
        finishReason:
          stopReason === "maxTokens" || completionTokens >= maxTokens
            ? "length"
            : toolCalls === true
              ? "tool_calls"
              : "stop",
        promptTokens,
        completionTokens,
      };
    } finally {
      stop.abort();
      await done.catch(() => undefined);
      this.#handOff(sequence);
    }
  }

  /** A free sequence of the context, waiting for one when all are generating. */
  #acquire(signal: AbortSignal): Promise<LlamaContextSequence> | LlamaContextSequence {
    signal.throwIfAborted();
    const free = this.#free.pop();
    if (free !== undefined) return free;
    return new Promise<LlamaContextSequence>((resolve, reject) => {
      const onAbort = () => {
        const at = this.#waiting.indexOf(take);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(signal.reason);
      };
      const take = (sequence: LlamaContextSequence) => {
        signal.removeEventListener("abort", onAbort);
        resolve(sequence);
      };
      this.#waiting.push(take);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** A sequence back: straight to the next waiting generation, else to the free ones. */
  #handOff(sequence: LlamaContextSequence): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(sequence);
    else this.#free.push(sequence);
  }

  release(): Promise<void> {
    this.#released ??= (async () => {
      for (const grammar of this.#grammars.values()) await grammar.catch(() => undefined);
      await this.#context.dispose();
      await this.#model.dispose();
      await this.#llama.dispose();
    })();
    return this.#released;
  }
}

/** The token a prompt starts with, as node-llama-cpp's completion prepends it. */
function resolveBos(model: LlamaModel): Token | undefined {
  return model.tokens.shouldPrependBosToken ? (model.tokens.bos ?? undefined) : undefined;
}

/** The JSON schema of a forced call: the one function's arguments, or `{name, arguments}` of one of several. */
function callSchema(tools: readonly Tool[]): object {
  const args = (tool: Tool) => tool.parameters ?? { type: "object", properties: {} };
  if (tools.length === 1) return args(tools[0] as Tool);
  return {
    oneOf: tools.map((tool) => ({
      type: "object",
      properties: { name: { const: tool.name }, arguments: args(tool) },
      required: ["name", "arguments"],
      additionalProperties: false,
    })),
  };
}

/** The system message a forced call starts with: the functions, and that the answer is a call. */
function describeCall(tools: readonly Tool[]): string {
  const lines = tools.map(
    (t) =>
      `- ${t.name}${t.description === undefined ? "" : `: ${t.description}`}; its arguments follow the JSON schema ${JSON.stringify(t.parameters ?? {})}`,
  );
  return tools.length === 1
    ? `Answer with the arguments, as a JSON object, of a call to this function:\n${lines.join("\n")}`
    : `Answer with a call to one of these functions, as the JSON object {"name": ..., "arguments": {...}}:\n${lines.join("\n")}`;
}

/** `{name, arguments}` of a forced call's JSON text (the grammar made it). */
function parseCall(text: string): { name: string; arguments: string } {
  try {
    const call = JSON.parse(text) as { name?: unknown; arguments?: unknown };
    return { name: String(call.name ?? ""), arguments: JSON.stringify(call.arguments ?? {}) };
  } catch {
    // Cut short (max_tokens): the text as it is, as OpenAI gives a cut call's arguments.
    return { name: "", arguments: text };
  }
}

/** OpenAI's sampling fields as node-llama-cpp's options. */
function sampling(options: GenerateOptions) {
  const { temperature = 1, topP, stop, presencePenalty, frequencyPenalty } = options;
  const penalties = (presencePenalty ?? 0) > 0 || (frequencyPenalty ?? 0) > 0;
  return {
    temperature,
    ...(topP === undefined ? {} : { topP }),
    ...(stop === undefined || stop.length === 0 ? {} : { customStopTriggers: stop }),
    repeatPenalty: penalties
      ? {
          presencePenalty: Math.max(0, presencePenalty ?? 0),
          frequencyPenalty: Math.max(0, frequencyPenalty ?? 0),
        }
      : (false as const),
  };
}

/** Redirects fetch follows before it gives up (undici's bound). */
const MAX_REDIRECTS = 20;

/**
 * Removes what downloads of `name` left behind when their process was ended mid-way (a SIGTERM, a
 * kill): `<name>.<pid>.partial` files whose process is gone. A live process's download stays.
 */
async function sweepPartials(dir: string, name: string): Promise<void> {
  const prefix = `${name}.`;
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    if (!entry.startsWith(prefix) || !entry.endsWith(".partial")) continue;
    const pid = Number(entry.slice(prefix.length, -".partial".length));
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) continue;
    await rm(join(dir, entry), { force: true });
  }
}

/** Whether a process of that id runs (one of another user counts as running). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Bytes between two progress reports of a download whose size is not known. */
const PROGRESS_STEP_BYTES = 67_108_864; // 64 MiB

/** Options of {@link fetchModel}. */
export interface FetchModelOptions {
  /** The folder downloads go to (and are found in again: the warm cache mirrors it). */
  readonly dir: string;
  readonly signal?: AbortSignal;
  /** Largest file accepted, in bytes. @default 137_438_953_472 (128 GiB) */
  readonly maxBytes?: number;
  /** Called as bytes arrive, with the share done (0–100) when the size is known. */
  readonly onProgress?: (percent: number | undefined, bytes: number) => void;
  /**
   * Headers of the request (`authorization` for a gated model). Secrets here never reach a
   * message, and fetch drops `authorization` when a redirect leaves the URL's origin.
   */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The GGUF file at `url`, downloaded once into `dir`: a file already there (an earlier start, or
 * the warm cache's copy from the network volume) is used as it is. Written under a temporary
 * name and renamed whole, so a download cut short never passes for the model.
 */
export async function fetchModel(url: string, options: FetchModelOptions): Promise<string> {
  const { dir, signal, maxBytes = 137_438_953_472, onProgress, headers } = options;
  const parsed = new URL(url);
  const name = basename(parsed.pathname) || "model.gguf";
  // What messages name: a signed URL's query (X-Amz-Signature=…, token=…) and a user:password@
  // are secrets, and these messages reach the log and the platform (a failed setup's reason).
  const shown = `${parsed.origin}${parsed.pathname}${parsed.search === "" ? "" : "?…"}`;
  const key = createHash("sha256").update(url).digest("hex").slice(0, 12);
  const path = join(dir, `${key}-${name}`);
  if ((await stat(path).catch(() => undefined))?.isFile() === true) return path;
  await mkdir(dir, { recursive: true });
  await sweepPartials(dir, basename(path));
  let res: Response;
  try {
    res = await fetch(url, {
      ...(signal === undefined ? {} : { signal }),
      ...(headers === undefined ? {} : { headers: { ...headers } }),
      redirect: "follow",
    });
  } catch (err) {
    if (signal?.aborted === true) throw err;
    // fetch says only "fetch failed"; what happened is its cause's message.
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    throw new Error(
      /redirect count exceeded/i.test(why)
        ? `downloading the model from ${shown} failed: it redirects more than ${MAX_REDIRECTS} times (a redirect loop?)`
        : `downloading the model from ${shown} failed: ${why}`,
      { cause: err },
    );
  }
  if (!res.ok || res.body === null) {
    await res.body?.cancel();
    throw new Error(`downloading the model from ${shown} failed: HTTP ${res.status}`);
  }
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await res.body.cancel();
    throw new Error(
      `the model at ${shown} is ${declared} bytes, over the limit of ${maxBytes} (LLM_MODEL_MAX_BYTES)`,
    );
  }
  const partial = `${path}.${process.pid}.partial`;
  let bytes = 0;
  let shownPercent = -1;
  /** Without a size, progress is reported every {@link PROGRESS_STEP_BYTES}: not once per chunk (a log line each). */
  let nextShownBytes = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        callback(
          new Error(`the model at ${shown} is over the limit of ${maxBytes} bytes (LLM_MODEL_MAX_BYTES)`),
        );
        return;
      }
      const percent =
        Number.isFinite(declared) && declared > 0 ? Math.floor((bytes / declared) * 100) : undefined;
      if (percent !== undefined ? percent !== shownPercent : bytes >= nextShownBytes) {
        shownPercent = percent ?? shownPercent;
        nextShownBytes = bytes + PROGRESS_STEP_BYTES;
        onProgress?.(percent, bytes);
      }
      callback(null, chunk);
    },
  });
  try {
    const body = Readable.fromWeb(res.body as import("node:stream/web").ReadableStream<Uint8Array>);
    await pipeline([body, count, createWriteStream(partial)], signal === undefined ? {} : { signal });
    await checkGguf(partial);
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  return path;
}
