import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  type ChatHistoryItem,
  type ChatWrapper,
  getLlama,
  type Llama,
  LlamaChat,
  LlamaCompletion,
  type LlamaContext,
  type LlamaContextSequence,
  LlamaLogLevel,
  type LlamaModel,
  resolveChatWrapper,
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
  /** Most tokens generated. @default what the context has left */
  readonly maxTokens?: number;
  /** 0 picks the likeliest token every time. @default 1 */
  readonly temperature?: number;
  readonly topP?: number;
  /** Makes a sampled generation repeatable. @default random */
  readonly seed?: number;
  /** Generation stops before any of these texts; they are not part of the answer. */
  readonly stop?: readonly string[];
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  /** Stops the generation (the answer so far stands). */
  readonly signal: AbortSignal;
}

/** What a generation returns when it ends. */
export interface GenerationEnd {
  /** "length" when it stopped at maxTokens, else "stop" (end of the answer, a stop text, the signal). */
  readonly finishReason: "length" | "stop";
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** One chat message, as the model's chat template takes it. */
export interface Message {
  readonly role: "system" | "user" | "assistant";
  readonly content: string;
}

/** A loaded model: `chat` and `complete` stream text; `release` frees its memory. */
export interface Llm {
  readonly device: Device;
  /** Why it runs where it runs ("CUDA build loaded", "no CUDA build loads here: ..."). */
  readonly deviceReason: string;
  readonly parallel: number;
  readonly contextSize: number;
  /** The chat template node-llama-cpp chose for the model ("ChatML", "Llama3_1", "JinjaTemplate", ...). */
  readonly chatTemplate: string;
  chat(messages: readonly Message[], options: GenerateOptions): AsyncGenerator<string, GenerationEnd>;
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

/** A queue between llama.cpp's callbacks and a generator; bounded by maxTokens and the context. */
class TextChannel {
  readonly #items: string[] = [];
  #wake: (() => void) | undefined;
  #ended = false;

  push(text: string): void {
    this.#items.push(text);
    this.#wake?.();
  }
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }
  async *drain(): AsyncGenerator<string> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
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

type Run = (sequence: LlamaContextSequence, callbacks: Callbacks) => Promise<{ stopReason: string }>;
interface Callbacks {
  readonly onTextChunk: (text: string) => void;
  readonly onToken: (tokens: readonly unknown[]) => void;
  readonly signal: AbortSignal;
}

class LoadedLlm implements Llm {
  readonly #llama: Llama;
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;
  readonly #wrapper: ChatWrapper;
  /** Generations waiting for a free sequence, in order. */
  readonly #waiting: (() => void)[] = [];
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
  }

  chat(messages: readonly Message[], options: GenerateOptions): AsyncGenerator<string, GenerationEnd> {
    const history: ChatHistoryItem[] = messages.map((m) =>
      m.role === "assistant" ? { type: "model", response: [m.content] } : { type: m.role, text: m.content },
    );
    // The answer to write: an empty model turn at the end, as node-llama-cpp's chat session does.
    history.push({ type: "model", response: [] });
    return this.#generate(options, async (sequence, callbacks) => {
      const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: this.#wrapper });
      try {
        const result = await chat.generateResponse(history, {
          ...sampling(options),
          ...callbacks,
          stopOnAbortSignal: true,
        });
        return result.metadata;
      } finally {
        chat.dispose({ disposeSequence: false });
      }
    });
  }

  complete(prompt: string, options: GenerateOptions): AsyncGenerator<string, GenerationEnd> {
    return this.#generate(options, async (sequence, callbacks) => {
      const completion = new LlamaCompletion({ contextSequence: sequence });
      try {
        const result = await completion.generateCompletionWithMeta(prompt, {
          ...sampling(options),
          ...callbacks,
          stopOnAbortSignal: true,
        });
        return result.metadata;
      } finally {
        completion.dispose({ disposeSequence: false });
      }
    });
  }

  /** Takes a sequence, runs one generation on it, streams its text, gives the sequence back. */
  async *#generate(options: GenerateOptions, run: Run): AsyncGenerator<string, GenerationEnd> {
    const sequence = await this.#acquire(options.signal);
    // Aborted when the consumer stops early (max_tokens taken, a job-stop, a client gone).
    const stop = new AbortController();
    const signal = AbortSignal.any([options.signal, stop.signal]);
    const channel = new TextChannel();
    let completionTokens = 0;
    const done = run(sequence, {
      signal,
      onTextChunk: (text) => {
        if (text !== "") channel.push(text);
      },
      onToken: (tokens) => {
        completionTokens += tokens.length;
      },
    }).finally(() => channel.end());
    // Settled whatever happens below, so no rejection goes unhandled.
    done.catch(() => undefined);
    try {
      yield* channel.drain();
      const { stopReason } = await done;
      return {
        finishReason: stopReason === "maxTokens" ? "length" : "stop",
        // What was evaluated as input is the prompt: generated tokens count as output.
        promptTokens: sequence.tokenMeter.usedInputTokens,
        completionTokens,
      };
    } finally {
      stop.abort();
      await done.catch(() => undefined);
      sequence.dispose();
      this.#waiting.shift()?.();
    }
  }

  /** A free sequence of the context, waiting for one when all are generating. */
  async #acquire(signal: AbortSignal): Promise<LlamaContextSequence> {
    while (this.#context.sequencesLeft === 0) {
      signal.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const at = this.#waiting.indexOf(wake);
          if (at >= 0) this.#waiting.splice(at, 1);
          reject(signal.reason);
        };
        const wake = () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        this.#waiting.push(wake);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    }
    return this.#context.getSequence();
  }

  release(): Promise<void> {
    this.#released ??= (async () => {
      await this.#context.dispose();
      await this.#model.dispose();
      await this.#llama.dispose();
    })();
    return this.#released;
  }
}

/** OpenAI's sampling fields as node-llama-cpp's options. */
function sampling(options: GenerateOptions) {
  const { maxTokens, temperature = 1, topP, seed, stop, presencePenalty, frequencyPenalty } = options;
  const penalties = (presencePenalty ?? 0) > 0 || (frequencyPenalty ?? 0) > 0;
  return {
    ...(maxTokens === undefined ? {} : { maxTokens }),
    temperature,
    ...(topP === undefined ? {} : { topP }),
    ...(seed === undefined ? {} : { seed }),
    ...(stop === undefined || stop.length === 0 ? {} : { customStopTriggers: stop }),
    repeatPenalty: penalties
      ? {
          presencePenalty: Math.max(0, presencePenalty ?? 0),
          frequencyPenalty: Math.max(0, frequencyPenalty ?? 0),
        }
      : (false as const),
  };
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
}

/**
 * The GGUF file at `url`, downloaded once into `dir`: a file already there (an earlier start, or
 * the warm cache's copy from the network volume) is used as it is. Written under a temporary
 * name and renamed whole, so a download cut short never passes for the model.
 */
export async function fetchModel(url: string, options: FetchModelOptions): Promise<string> {
  const { dir, signal, maxBytes = 137_438_953_472, onProgress } = options;
  const parsed = new URL(url);
  const name = basename(parsed.pathname) || "model.gguf";
  // What messages name: a signed URL's query (X-Amz-Signature=…, token=…) and a user:password@
  // are secrets, and these messages reach the log and the platform (a failed setup's reason).
  const shown = `${parsed.origin}${parsed.pathname}${parsed.search === "" ? "" : "?…"}`;
  const key = createHash("sha256").update(url).digest("hex").slice(0, 12);
  const path = join(dir, `${key}-${name}`);
  if ((await stat(path).catch(() => undefined))?.isFile() === true) return path;
  await mkdir(dir, { recursive: true });
  const res = await fetch(url, { ...(signal === undefined ? {} : { signal }), redirect: "follow" });
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
