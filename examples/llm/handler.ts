import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  hfCacheDir,
  hfDownloadUrl,
  isHfSource,
  isRunletError,
  parseHfSource,
  RunletError,
  resolveCachedModel,
} from "runlet";
import {
  type ChatCompletionRequest,
  type ChatCompletionToolCallDelta,
  type ChunkObject,
  defineOpenAIHandler,
  type GenerationResult,
  openAIJobError,
} from "runlet/openai";
import {
  type ChatOptions,
  type ChatPiece,
  fetchModel,
  type GenerateOptions,
  type GenerationEnd,
  type Llm,
  LlmRequestError,
  loadLlm,
  type Message,
  type Tool,
} from "./llm.js";
import { writeTinyModel } from "./tiny-model.js";

/**
 * An OpenAI-compatible chat endpoint that runs a GGUF model in the worker's process with
 * llama.cpp (node-llama-cpp): the model loads once in `setup`; `/v1/chat/completions` and
 * `/v1/completions` stream its tokens, honour max_tokens, stop, temperature, top_p and seed,
 * count usage with the model's tokenizer, and stop generating on a job-stop or a client that
 * hangs up. Concurrent jobs are parallel sequences of one context: llama.cpp evaluates them
 * in one batch. Configured from the environment ({@link configFromEnv}).
 */

/** The endpoint's settings. */
export interface LlmConfig {
  /**
   * A GGUF file's path (on the network volume too: /runpod-volume/...), an http(s) URL, a file of
   * a Hugging Face repository as `hf:org/name[@revision]/file.gguf` (the platform's model cache
   * first, else downloaded once), or "tiny".
   */
  readonly model: string;
  /** The model id clients send and /v1/models lists. */
  readonly modelId: string;
  /** Generations at once: the worker's concurrency and the context's sequences. */
  readonly parallel: number;
  /** Tokens per sequence (prompt and answer). */
  readonly contextSize: number;
  /** CPU threads llama.cpp computes with; 0: llama.cpp's default (the machine's math cores). */
  readonly threads: number;
  /** Where a URL's model is downloaded to (and the tiny model written); mirrored on the network volume. */
  readonly modelDir: string;
  /**
   * Tokens generated within this window go to the platform as one stream item (the client still
   * gets one event per token): one HTTP post per token costs the worker's main thread more than
   * generating the token. 0: one item per token.
   */
  readonly streamCoalesceMs: number;
  /** Largest model file a URL may give, in bytes. */
  readonly maxModelBytes: number;
  /** A GPU is expected: only the CUDA build of llama.cpp is tried, and a worker without it is unfit. */
  readonly expectGpu: boolean;
  /** The model cache an `hf:` model is looked up in first (the platform's, or RUNLET_HF_CACHE's folder). */
  readonly hfCache: string;
  /** The hub an `hf:` model the cache lacks is downloaded from; undefined: https://huggingface.co. */
  readonly hubUrl: string | undefined;
  /** Sent as a bearer token with an `hf:` download (a gated or private model). A secret: never logged. */
  readonly hfToken: string | undefined;
  /** An `hf:` model the cache lacks is an error, not a download. */
  readonly offline: boolean;
}

const isUrl = (source: string) => /^https?:\/\//i.test(source);

/** Whether an environment variable says yes. */
const isSet = (text: string | undefined) => ["1", "true", "yes", "on"].includes((text ?? "").toLowerCase());

/** An integer environment variable, or its default; anything else is refused with the variable named. */
function intFrom(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * The settings from the environment:
 *
 * - `LLM_MODEL`: the model, as {@link LlmConfig.model}; unset, the tiny random model, whose answers
 *   are noise: for tests, `runlet dev` and `runlet build`'s verify step, which runs the bundle as
 *   the image does (`NODE_ENV=production`) with nothing downloaded. An endpoint that forgot it
 *   logs a warning at start and serves only the model id `tiny-llama`: requests naming the real
 *   model get 404 model_not_found, not noise;
 * - `LLM_MODEL_ID` (default: the file's name without `.gguf`), `LLM_PARALLEL` (4),
 *   `LLM_CONTEXT_SIZE` (4096), `LLM_THREADS` (0: llama.cpp's default), `LLM_MODEL_DIR` (the system's temporary folder's `llm-models`), `LLM_MODEL_MAX_BYTES` (128 GiB), `LLM_STREAM_COALESCE_MS` (20),
 *   `LLM_EXPECT_GPU=1` on a GPU endpoint;
 * - for an `hf:` model: `RUNLET_HF_CACHE` (the model cache's folder, default the platform's
 *   /runpod-volume/huggingface-cache/hub), `HF_ENDPOINT` (the hub, default https://huggingface.co),
 *   `HF_TOKEN` (a gated or private model's token), `HF_HUB_OFFLINE=1` (no download: a model the
 *   cache lacks fails setup).
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): LlmConfig {
  const model = env["LLM_MODEL"] || "tiny";
  // A malformed hf: source is refused here, with the shape it should have.
  if (isHfSource(model)) parseHfSource(model);
  // A URL's file name from its path alone: its query (?download=1, a signature) is not a name.
  const file =
    (isUrl(model) && URL.canParse(model) ? new URL(model).pathname : model)
      .split("/")
      .filter(Boolean)
      .at(-1) ?? "model";
  return {
    model,
    // The tiny model answers to its own id only, whatever LLM_MODEL_ID says: an endpoint that set
    // the real model's id and forgot LLM_MODEL answers 404 model_not_found, not noise.
    modelId: model === "tiny" ? "tiny-llama" : env["LLM_MODEL_ID"] || file.replace(/\.gguf$/i, "") || "model",
    parallel: intFrom(env, "LLM_PARALLEL", 4, 1, 64),
    contextSize: intFrom(env, "LLM_CONTEXT_SIZE", 4096, 64, 1_048_576),
    threads: intFrom(env, "LLM_THREADS", 0, 0, 1024),
    modelDir: env["LLM_MODEL_DIR"] || join(tmpdir(), "llm-models"),
    streamCoalesceMs: intFrom(env, "LLM_STREAM_COALESCE_MS", 20, 0, 1_000),
    maxModelBytes: intFrom(env, "LLM_MODEL_MAX_BYTES", 137_438_953_472, 1, Number.MAX_SAFE_INTEGER),
    expectGpu: isSet(env["LLM_EXPECT_GPU"]),
    hfCache: hfCacheDir(env),
    hubUrl: env["HF_ENDPOINT"] || undefined,
    hfToken: env["HF_TOKEN"] || undefined,
    offline: isSet(env["HF_HUB_OFFLINE"]),
  };
}

/** The text of a message's content: a string, or its text parts joined; other parts are refused. */
function textOf(content: ChatCompletionRequest["messages"][number]["content"], at: number): string {
  if (typeof content === "string") return content;
  let text = "";
  for (const part of content ?? []) {
    if (part.type !== "text" || typeof part["text"] !== "string") {
      throw openAIJobError(`this model reads text only, not ${part.type} parts`, "invalid_request_error", {
        code: "invalid_value",
        param: `messages[${at}].content`,
      });
    }
    text += part["text"];
  }
  return text;
}

/** A refusal of the request, in OpenAI's shape, naming the field. */
function refuse(message: string, param: string, code = "invalid_value"): never {
  throw openAIJobError(message, "invalid_request_error", { code, param });
}

/** An assistant's tool call as the template takes it back, its result filled in by the tool message. */
type PendingCall = { name: string; arguments: unknown; result: string | undefined; at: number };

/** The request's messages as the model's chat template takes them: tool calls with their results. */
function messagesOf(request: ChatCompletionRequest): Message[] {
  const out: Message[] = [];
  const calls = new Map<string, PendingCall>();
  request.messages.forEach((m, at) => {
    if (m.role === "system" || m.role === "developer") {
      out.push({ role: "system", content: textOf(m.content, at) });
    } else if (m.role === "user") {
      out.push({ role: "user", content: textOf(m.content, at) });
    } else if (m.role === "assistant") {
      const toolCalls = (m.tool_calls ?? []).map((call, j) => {
        if (call.type !== "function" || call.function === undefined) {
          refuse("only function tool calls are served", `messages[${at}].tool_calls[${j}]`);
        }
        const pending: PendingCall = {
          name: call.function.name,
          arguments: parseArguments(call.function.arguments),
          result: undefined,
          at,
        };
        calls.set(call.id, pending);
        return pending;
      });
      out.push({
        role: "assistant",
        content: textOf(m.content, at),
        ...(toolCalls.length === 0 ? {} : { toolCalls: toolCalls as Message["toolCalls"] & PendingCall[] }),
      });
    } else if (m.role === "tool") {
      if (m.tool_call_id === undefined) {
        refuse(
          "a tool message needs the tool_call_id of the call it answers",
          `messages[${at}].tool_call_id`,
          "missing_required_parameter",
        );
      }
      const call = calls.get(m.tool_call_id);
      if (call === undefined) {
        refuse(
          `the tool_call_id ${JSON.stringify(m.tool_call_id)} names no tool call of an earlier assistant message`,
          `messages[${at}].tool_call_id`,
        );
      }
      call.result = textOf(m.content, at);
    } else {
      refuse(`messages with role ${m.role} are not served here (use tool)`, `messages[${at}].role`);
    }
  });
  for (const [id, call] of calls) {
    if (call.result === undefined) {
      refuse(
        `the assistant message's tool call ${JSON.stringify(id)} has no tool message answering it`,
        `messages[${call.at}].tool_calls`,
      );
    }
  }
  return out;
}

/** A tool call's arguments as the client sent them: parsed JSON, or the text when it does not parse. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Refuses, naming it, each field this endpoint does not serve, rather than answering as if it did. */
function refuseUnserved(request: Record<string, unknown>, kind: "chat" | "completions"): void {
  const given = (name: string) => request[name] !== undefined && request[name] !== null;
  if (kind === "chat" && request["logprobs"] === true) {
    refuse("this endpoint does not return log probabilities", "logprobs");
  }
  if (kind === "chat" && given("top_logprobs")) {
    refuse("this endpoint does not return log probabilities", "top_logprobs");
  }
  if (kind === "completions" && given("logprobs")) {
    refuse("this endpoint does not return log probabilities", "logprobs");
  }
  if (kind === "completions" && request["echo"] === true)
    refuse("this endpoint does not echo the prompt", "echo");
  if (kind === "completions" && given("suffix") && request["suffix"] !== "") {
    refuse("this endpoint does not fill in between a prompt and a suffix", "suffix");
  }
  if (kind === "completions" && typeof request["best_of"] === "number" && request["best_of"] > 1) {
    refuse("best_of must be 1: this endpoint makes one completion per request", "best_of");
  }
  if (kind === "chat" && given("functions")) {
    refuse("functions is the deprecated form of tools: send tools (and tool_choice) instead", "functions");
  }
  if (kind === "chat" && given("function_call")) {
    refuse("function_call is the deprecated form of tool_choice: send tool_choice instead", "function_call");
  }
  if (kind === "chat" && given("audio")) refuse("this endpoint answers in text only", "audio");
  if (given("logit_bias") && Object.keys(request["logit_bias"] as object).length > 0) {
    refuse("this endpoint does not take logit_bias", "logit_bias");
  }
}

/** The tools, tool_choice and response_format of a chat request, as the model takes them. */
function chatFormOf(
  request: ChatCompletionRequest,
): Pick<ChatOptions, "tools" | "toolChoice" | "parallelToolCalls" | "format"> {
  const tools: Tool[] = (request.tools ?? []).map((tool, at) => {
    if (tool.type !== "function" || tool.function === undefined) {
      refuse(`only function tools are served, not ${JSON.stringify(tool.type)}`, `tools[${at}].type`);
    }
    const { name, description, parameters } = tool.function;
    return {
      name,
      ...(description == null ? {} : { description }),
      ...(parameters == null ? {} : { parameters }),
    };
  });
  const choice = request.tool_choice ?? undefined;
  if (tools.length === 0 && (choice === "required" || typeof choice === "object")) {
    refuse("tool_choice asks for a tool call, but the request gives no tools", "tool_choice");
  }
  const format = request.response_format ?? undefined;
  return {
    tools,
    ...(choice === undefined
      ? {}
      : { toolChoice: typeof choice === "string" ? choice : { name: choice.function.name } }),
    ...(request.parallel_tool_calls == null ? {} : { parallelToolCalls: request.parallel_tool_calls }),
    ...(format === undefined || format.type === "text"
      ? {}
      : format.type === "json_schema" && format.json_schema.schema != null
        ? { format: { type: "json_schema" as const, schema: format.json_schema.schema } }
        : { format: { type: "json" as const } }),
  };
}

/** Sampling and bounds from the fields chat and completions share. */
function optionsOf(
  request: {
    temperature?: number | null | undefined;
    top_p?: number | null | undefined;
    seed?: number | null | undefined;
  } & Record<string, unknown>,
  maxTokens: number | undefined,
  signal: AbortSignal,
): GenerateOptions {
  const stop = request["stop"] as string | string[] | null | undefined;
  const penalty = (name: string) =>
    typeof request[name] === "number" ? (request[name] as number) : undefined;
  return {
    signal,
    temperature: request.temperature ?? 1,
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(request.top_p == null ? {} : { topP: request.top_p }),
    ...(request.seed == null ? {} : { seed: request.seed }),
    ...(stop == null ? {} : { stop: typeof stop === "string" ? [stop] : stop }),
    ...(penalty("presence_penalty") === undefined ? {} : { presencePenalty: penalty("presence_penalty") }),
    ...(penalty("frequency_penalty") === undefined ? {} : { frequencyPenalty: penalty("frequency_penalty") }),
  } as GenerateOptions;
}

/** A streamed delta: text, and tool-call pieces in OpenAI's shape. */
interface Delta {
  content?: string;
  tool_calls?: ChatCompletionToolCallDelta[];
}

/** The delta of one piece; a call's first piece gets the call's id (made here, one per call). */
function deltaOf(piece: ChatPiece, ids: Map<number, string>): Delta {
  if (typeof piece === "string") return { content: piece };
  const { index, name, arguments: args } = piece.toolCall;
  if (name === undefined) return { tool_calls: [{ index, function: { arguments: args } }] };
  const id = `call_${randomUUID().replaceAll("-", "")}`;
  ids.set(index, id);
  return { tool_calls: [{ index, id, type: "function", function: { name, arguments: args } }] };
}

/** What runlet streams for a delta: its text alone, or a chunk object with the tool calls. */
function itemOf(delta: Delta): string | ChunkObject {
  if (delta.tool_calls === undefined) return delta.content ?? "";
  return { choices: [{ index: 0, delta, logprobs: null, finish_reason: null }] };
}

/**
 * The model's text and tool calls, one item per piece, ending with finish_reason and the
 * tokenizer's usage (runlet reads them at max_tokens too: the model stops there itself). A
 * request the model cannot take fails as OpenAI's 400, naming the field.
 */
async function* answer(
  generation: AsyncGenerator<ChatPiece, GenerationEnd>,
): AsyncGenerator<string | ChunkObject, GenerationResult> {
  const ids = new Map<number, string>();
  try {
    for (;;) {
      let step: IteratorResult<ChatPiece, GenerationEnd>;
      try {
        step = await generation.next();
      } catch (err) {
        if (err instanceof LlmRequestError) refuse(err.message, err.param, err.code);
        throw err;
      }
      if (step.done === true) {
        const { finishReason, promptTokens, completionTokens } = step.value;
        return {
          finish_reason: finishReason,
          usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens },
        };
      }
      yield itemOf(deltaOf(step.value, ids));
    }
  } finally {
    // Stopped early (a job-stop, a client gone): the model stops and its sequence is freed.
    await generation.return(undefined as never);
  }
}

/**
 * An `hf:` model's GGUF file: from the platform's model cache when the endpoint caches that model
 * (it is placed there before the worker starts, unbilled), else downloaded from the hub once into
 * `modelDir` (with HF_TOKEN as a bearer token). Offline, a model the cache lacks is an error
 * naming what the cache holds.
 */
async function fromHub(
  config: LlmConfig,
  signal: AbortSignal,
  onProgress: (percent: number | undefined, bytes: number) => void,
): Promise<{ path: string; origin: string }> {
  const source = parseHfSource(config.model);
  try {
    const cached = await resolveCachedModel(source.repo, {
      revision: source.revision,
      file: source.file,
      cacheDir: config.hfCache,
    });
    return { path: cached.path, origin: `the model cache's snapshot ${cached.commit}` };
  } catch (err) {
    if (!isRunletError(err) || err.code !== "RUNLET_MODEL_NOT_CACHED") throw err;
    if (config.offline) {
      throw new RunletError(
        "RUNLET_MODEL_NOT_CACHED",
        `HF_HUB_OFFLINE is set, so LLM_MODEL ${config.model} is not downloaded, and ${err.message}`,
        { cause: err, ...(err.details === undefined ? {} : { details: err.details }) },
      );
    }
  }
  const url = hfDownloadUrl(source, config.hubUrl);
  try {
    const path = await fetchModel(url, {
      dir: config.modelDir,
      maxBytes: config.maxModelBytes,
      signal,
      onProgress,
      ...(config.hfToken === undefined ? {} : { headers: { authorization: `Bearer ${config.hfToken}` } }),
    });
    return { path, origin: `downloaded from ${url}` };
  } catch (err) {
    // The hub answers 401 to a gated or private model without a token, 403 to one not granted.
    if (err instanceof Error && / HTTP 40[13]$/.test(err.message)) {
      throw new Error(
        `${err.message}: ${config.model} is not in the model cache, and the hub refused the download (a gated or private model needs HF_TOKEN, of an account granted access)`,
        { cause: err },
      );
    }
    throw err;
  }
}

/** The handler for `config`: its model loads in setup, its generations share one context. */
export function llmHandler(config: LlmConfig) {
  return defineOpenAIHandler<{ llm: Llm }>({
    models: [config.modelId],
    concurrency: config.parallel,
    streamCoalesceMs: config.streamCoalesceMs,
    // A large model's download and load may take minutes; a worker that cannot finish in time is unfit.
    setupTimeoutMs: 1_800_000,
    // A URL's download lands in modelDir; mirrored on the network volume, the next worker finds it there.
    ...(isUrl(config.model) || isHfSource(config.model)
      ? { warmCache: { dirs: [{ path: config.modelDir, name: "llm-models" }] } }
      : {}),
    async setup({ log, progress, signal }) {
      let modelPath: string;
      /** Where an hf: model came from: the cache's snapshot, or the hub. */
      let origin: string | undefined;
      const onProgress = (percent: number | undefined, bytes: number) =>
        progress(percent === undefined ? `model ${bytes} bytes` : `model ${percent} %`);
      if (config.model === "tiny") {
        modelPath = await writeTinyModel(join(config.modelDir, "tiny-llama.gguf"));
        log.warn(
          { modelPath, modelId: config.modelId },
          "serving the tiny random model, whose answers are noise: set LLM_MODEL to a GGUF file's path or URL",
        );
      } else if (isUrl(config.model)) {
        progress("fetching the model");
        modelPath = await fetchModel(config.model, {
          dir: config.modelDir,
          maxBytes: config.maxModelBytes,
          signal,
          onProgress,
        });
      } else if (isHfSource(config.model)) {
        progress("fetching the model");
        ({ path: modelPath, origin } = await fromHub(config, signal, onProgress));
      } else {
        modelPath = resolve(config.model);
      }
      progress("loading the model");
      let llm: Llm;
      try {
        llm = await loadLlm({
          modelPath,
          gpu: config.expectGpu ? "cuda" : "auto",
          parallel: config.parallel,
          contextSize: config.contextSize,
          // The tiny model gains nothing from more threads, and llama.cpp's spinning threads make
          // it crawl on a busy machine (README, "Threads"): one, unless LLM_THREADS says.
          ...(config.threads !== 0
            ? { threads: config.threads }
            : config.model === "tiny"
              ? { threads: 1 }
              : {}),
          onLog: (level, message) => log[level]({ llama: true }, message.trim()),
        });
      } catch (err) {
        if (!config.expectGpu) throw err;
        // A failed setup pings unhealthy with check=setup and this message in its reason.
        throw new Error(`LLM_EXPECT_GPU is set but llama.cpp's CUDA build does not load: ${String(err)}`, {
          cause: err,
        });
      }
      const { device, deviceReason, contextSize, chatTemplate } = llm;
      log.info(
        {
          device,
          reason: deviceReason,
          modelPath,
          ...(origin === undefined ? {} : { origin }),
          parallel: config.parallel,
          contextSize,
          chatTemplate,
        },
        `the model runs on the ${device === "cuda" ? "GPU (CUDA)" : "CPU"}`,
      );
      if (config.expectGpu && device !== "cuda") {
        await llm.release();
        throw new Error(`LLM_EXPECT_GPU is set but the model runs on the CPU: ${deviceReason}`);
      }
      return { llm };
    },
    // At shutdown, after the last job: the context's and the weights' memory (GPU memory too) goes back.
    async teardown({ llm }) {
      await llm.release();
    },
    chat(request, { state, signal }) {
      refuseUnserved(request, "chat");
      const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined;
      const messages = messagesOf(request);
      const options: ChatOptions = { ...optionsOf(request, maxTokens, signal), ...chatFormOf(request) };
      return answer(state.llm.chat(messages, options));
    },
    completions(request, { state, signal }) {
      const prompt = typeof request.prompt === "string" ? request.prompt : request.prompt[0];
      if (typeof prompt !== "string") {
        throw openAIJobError("this endpoint takes the prompt as text", "invalid_request_error", {
          code: "invalid_value",
          param: "prompt",
        });
      }
      refuseUnserved(request, "completions");
      const maxTokens = request.max_tokens ?? undefined;
      return answer(state.llm.complete(prompt, optionsOf(request, maxTokens, signal)));
    },
  });
}

export default llmHandler(configFromEnv());
