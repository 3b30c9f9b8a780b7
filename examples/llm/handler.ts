import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  type ChatCompletionRequest,
  defineOpenAIHandler,
  type GenerationResult,
  openAIJobError,
} from "runlet/openai";
import {
  fetchModel,
  type GenerateOptions,
  type GenerationEnd,
  type Llm,
  loadLlm,
  type Message,
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
  /** A GGUF file's path (on the network volume too: /runpod-volume/...), an http(s) URL, or "tiny". */
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
}

const isUrl = (source: string) => /^https?:\/\//i.test(source);

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
 *   `LLM_EXPECT_GPU=1` on a GPU endpoint.
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): LlmConfig {
  const model = env["LLM_MODEL"] || "tiny";
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
    expectGpu: ["1", "true", "yes"].includes((env["LLM_EXPECT_GPU"] ?? "").toLowerCase()),
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

/** The request's messages as the model's chat template takes them. */
function messagesOf(request: ChatCompletionRequest): Message[] {
  if (request.tools !== undefined && request.tools.length > 0) {
    throw openAIJobError("this endpoint does not serve tool calls", "invalid_request_error", {
      code: "invalid_value",
      param: "tools",
    });
  }
  return request.messages.map((m, at) => {
    const content = textOf(m.content, at);
    if (m.role === "system" || m.role === "developer") return { role: "system", content };
    if (m.role === "assistant") return { role: "assistant", content };
    if (m.role === "user") return { role: "user", content };
    throw openAIJobError(`messages with role ${m.role} are not served here`, "invalid_request_error", {
      code: "invalid_value",
      param: `messages[${at}].role`,
    });
  });
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

/**
 * The model's text, one item per chunk, ending with finish_reason and the tokenizer's usage.
 * runlet stops taking items at max_tokens and then never reads what the generator returns, so
 * the last two chunks before that bound go out as one item: the usage still arrives (with
 * max_tokens 1 it cannot; the completion count is then runlet's, the prompt's 0).
 */
async function* answer(
  generation: AsyncGenerator<string, GenerationEnd>,
  maxTokens: number | undefined,
): AsyncGenerator<string, GenerationResult> {
  let items = 0;
  let held = "";
  try {
    for (;;) {
      const step = await generation.next();
      if (step.done === true) {
        if (held !== "") yield held;
        const { finishReason, promptTokens, completionTokens } = step.value;
        return {
          finish_reason: finishReason,
          usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens },
        };
      }
      if (maxTokens !== undefined && items >= maxTokens - 2) {
        held += step.value;
        continue;
      }
      items++;
      yield step.value;
    }
  } finally {
    // Stopped early (a job-stop, a client gone): the model stops and its sequence is freed.
    await generation.return(undefined as never);
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
    ...(isUrl(config.model) ? { warmCache: { dirs: [{ path: config.modelDir, name: "llm-models" }] } } : {}),
    async setup({ log, progress, signal }) {
      let modelPath: string;
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
          onProgress: (percent, bytes) =>
            progress(percent === undefined ? `model ${bytes} bytes` : `model ${percent} %`),
        });
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
        { device, reason: deviceReason, modelPath, parallel: config.parallel, contextSize, chatTemplate },
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
      const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined;
      const messages = messagesOf(request);
      return answer(state.llm.chat(messages, optionsOf(request, maxTokens, signal)), maxTokens);
    },
    completions(request, { state, signal }) {
      const prompt = typeof request.prompt === "string" ? request.prompt : request.prompt[0];
      if (typeof prompt !== "string") {
        throw openAIJobError("this endpoint takes the prompt as text", "invalid_request_error", {
          code: "invalid_value",
          param: "prompt",
        });
      }
      const maxTokens = request.max_tokens ?? undefined;
      return answer(state.llm.complete(prompt, optionsOf(request, maxTokens, signal)), maxTokens);
    },
  });
}

export default llmHandler(configFromEnv());
