import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * A tiny llama model written here, so tests, `runlet dev` and `runlet build`'s check run a real
 * GGUF through llama.cpp with nothing downloaded: two layers, random weights (a fixed seed), a
 * byte-level vocabulary. Its answers are noise, printable ASCII only: the weights keep the
 * end-of-generation tokens and the bytes outside 0x20–0x7E (and "<") from ever being picked, so a
 * generation always runs to `max_tokens` or a stop sequence. To serve a real model, point
 * `LLM_MODEL` at its GGUF file or URL (README).
 */

/** The shape of the tiny model. */
export interface TinyModelOptions {
  /** Seed of the random weights. @default 1 */
  readonly seed?: number;
  /** Transformer blocks. @default 2 */
  readonly layers?: number;
  /** Width of the residual stream. @default 64 */
  readonly embedding?: number;
  /** Width of each block's feed-forward layer. @default 128 */
  readonly feedForward?: number;
  /** Attention heads (key/value heads too). @default 4 */
  readonly heads?: number;
  /** Context the model says it was trained on, in tokens. @default 2048 */
  readonly contextLength?: number;
}

// GGUF's value types (ggml's gguf.h).
const UINT32 = 4;
const INT32 = 5;
const FLOAT32 = 6;
const BOOL = 7;
const STRING = 8;
const ARRAY = 9;
/** ggml's tensor type F32. */
const GGML_F32 = 0;
const ALIGNMENT = 32;

// llama.cpp's token types.
const NORMAL = 1;
const UNKNOWN = 2;
const CONTROL = 3;
const BYTE = 6;

/** ChatML, which node-llama-cpp recognises (its ChatMLChatWrapper) and which the tokens below hold. */
const CHAT_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** The vocabulary: control tokens, the 256 bytes (SentencePiece's byte fallback), and "▁", the space. */
function vocabulary(): { tokens: string[]; types: number[] } {
  const tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"];
  const types = [UNKNOWN, CONTROL, CONTROL, CONTROL, CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(BYTE);
  }
  tokens.push("\u2581");
  types.push(NORMAL);
  return { tokens, types };
}

/**
 * Tokens the model may pick: the printable ASCII bytes and the space, but not "<": node-llama-cpp
 * holds back text that may begin a stop text ("<|im_end|>") until it knows, and drops it when
 * max_tokens ends the answer there, so an answer would sometimes be a token short.
 */
function pickable(token: string, type: number): boolean {
  if (type === NORMAL) return true;
  if (type !== BYTE) return false;
  const byte = Number.parseInt(token.slice(3, 5), 16);
  return byte >= 0x20 && byte <= 0x7e && byte !== 0x3c;
}

/** mulberry32: a small seeded generator, so the same seed writes the same bytes. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Appends little-endian values to a growing list of buffers. */
class Writer {
  readonly parts: Buffer[] = [];
  length = 0;

  push(part: Buffer): void {
    this.parts.push(part);
    this.length += part.length;
  }
  u32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.push(b);
  }
  u64(value: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.push(b);
  }
  string(value: string): void {
    const bytes = Buffer.from(value, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  pad(): void {
    const rest = this.length % ALIGNMENT;
    if (rest !== 0) this.push(Buffer.alloc(ALIGNMENT - rest));
  }
}

type Value =
  | { type: typeof UINT32 | typeof INT32 | typeof FLOAT32; value: number }
  | { type: typeof BOOL; value: boolean }
  | { type: typeof STRING; value: string }
  | { type: typeof ARRAY; of: typeof STRING; value: readonly string[] }
  | { type: typeof ARRAY; of: typeof FLOAT32 | typeof INT32; value: readonly number[] };

function writeScalar(w: Writer, type: number, value: number | boolean | string): void {
  if (type === STRING) {
    w.string(value as string);
    return;
  }
  const b = Buffer.alloc(type === BOOL ? 1 : 4);
  if (type === UINT32) b.writeUInt32LE(value as number);
  else if (type === INT32) b.writeInt32LE(value as number);
  else if (type === FLOAT32) b.writeFloatLE(value as number);
  else b.writeUInt8(value === true ? 1 : 0);
  w.push(b);
}

interface Tensor {
  readonly name: string;
  /** ggml's order: the first dimension varies fastest (a matrix is [inputs, outputs]). */
  readonly dims: readonly number[];
  readonly data: Float32Array;
}

/** The model file's bytes (GGUF version 3, every tensor F32). */
export function tinyLlamaGguf(options: TinyModelOptions = {}): Buffer {
  const { seed = 1, layers = 2, embedding: n = 64, feedForward: ff = 128, heads = 4 } = options;
  const contextLength = options.contextLength ?? 2048;
  if (n % heads !== 0 || n < 8)
    throw new RangeError(`embedding (${n}) must be a multiple of heads (${heads}), ≥ 8`);
  const next = random(seed);
  const uniform = (size: number, scale: number) =>
    Float32Array.from({ length: size }, () => (next() * 2 - 1) * scale);
  const ones = (size: number) => new Float32Array(size).fill(1);
  const { tokens, types } = vocabulary();
  const vocab = tokens.length;

  // Dimension 0 of the residual stream is a constant: every embedding holds 4 there and no block
  // writes to it (row 0 of each output projection is zero). Its weight in the output layer is then a
  // fixed bias per token: -8 for the tokens the model must never pick, 0 for the others.
  const embeddings = uniform(vocab * n, 1);
  for (let t = 0; t < vocab; t++) embeddings[t * n] = 4;
  const output = uniform(vocab * n, 0.5);
  for (let t = 0; t < vocab; t++) output[t * n] = pickable(tokens[t] ?? "", types[t] ?? 0) ? 0 : -8;
  const noRowZero = (m: Float32Array, inputs: number) => {
    m.fill(0, 0, inputs);
    return m;
  };
  const scale = 1 / Math.sqrt(n);
  const tensors: Tensor[] = [
    { name: "token_embd.weight", dims: [n, vocab], data: embeddings },
    { name: "output_norm.weight", dims: [n], data: ones(n) },
    { name: "output.weight", dims: [n, vocab], data: output },
  ];
  for (let i = 0; i < layers; i++) {
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [n], data: ones(n) },
      { name: `blk.${i}.attn_q.weight`, dims: [n, n], data: uniform(n * n, scale) },
      { name: `blk.${i}.attn_k.weight`, dims: [n, n], data: uniform(n * n, scale) },
      { name: `blk.${i}.attn_v.weight`, dims: [n, n], data: uniform(n * n, scale) },
      { name: `blk.${i}.attn_output.weight`, dims: [n, n], data: noRowZero(uniform(n * n, scale), n) },
      { name: `blk.${i}.ffn_norm.weight`, dims: [n], data: ones(n) },
      { name: `blk.${i}.ffn_gate.weight`, dims: [n, ff], data: uniform(n * ff, scale) },
      { name: `blk.${i}.ffn_up.weight`, dims: [n, ff], data: uniform(n * ff, scale) },
      {
        name: `blk.${i}.ffn_down.weight`,
        dims: [ff, n],
        data: noRowZero(uniform(ff * n, 1 / Math.sqrt(ff)), ff),
      },
    );
  }

  const metadata: [string, Value][] = [
    ["general.architecture", { type: STRING, value: "llama" }],
    ["general.name", { type: STRING, value: "tiny-llama" }],
    ["general.alignment", { type: UINT32, value: ALIGNMENT }],
    ["llama.context_length", { type: UINT32, value: contextLength }],
    ["llama.embedding_length", { type: UINT32, value: n }],
    ["llama.block_count", { type: UINT32, value: layers }],
    ["llama.feed_forward_length", { type: UINT32, value: ff }],
    ["llama.attention.head_count", { type: UINT32, value: heads }],
    ["llama.attention.head_count_kv", { type: UINT32, value: heads }],
    ["llama.attention.layer_norm_rms_epsilon", { type: FLOAT32, value: 1e-5 }],
    ["llama.rope.dimension_count", { type: UINT32, value: n / heads }],
    ["llama.vocab_size", { type: UINT32, value: vocab }],
    ["tokenizer.ggml.model", { type: STRING, value: "llama" }],
    ["tokenizer.ggml.tokens", { type: ARRAY, of: STRING, value: tokens }],
    ["tokenizer.ggml.scores", { type: ARRAY, of: FLOAT32, value: tokens.map(() => 0) }],
    ["tokenizer.ggml.token_type", { type: ARRAY, of: INT32, value: types }],
    ["tokenizer.ggml.unknown_token_id", { type: UINT32, value: 0 }],
    ["tokenizer.ggml.bos_token_id", { type: UINT32, value: 1 }],
    ["tokenizer.ggml.eos_token_id", { type: UINT32, value: 4 }],
    ["tokenizer.ggml.add_bos_token", { type: BOOL, value: true }],
    ["tokenizer.ggml.add_space_prefix", { type: BOOL, value: false }],
    ["tokenizer.chat_template", { type: STRING, value: CHAT_TEMPLATE }],
  ];

  const w = new Writer();
  w.push(Buffer.from("GGUF", "latin1"));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(metadata.length);
  for (const [key, v] of metadata) {
    w.string(key);
    w.u32(v.type);
    if (v.type === ARRAY) {
      w.u32(v.of);
      w.u64(v.value.length);
      for (const item of v.value) writeScalar(w, v.of, item);
    } else {
      writeScalar(w, v.type, v.value);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_F32);
    w.u64(offset);
    offset += Math.ceil((t.data.length * 4) / ALIGNMENT) * ALIGNMENT;
  }
  w.pad();
  for (const t of tensors) {
    w.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    w.pad();
  }
  return Buffer.concat(w.parts, w.length);
}

/** Writes the tiny model to `path` (its folder made, the file written whole then renamed) and returns the path. */
export async function writeTinyModel(path: string, options: TinyModelOptions = {}): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  await writeFile(partial, tinyLlamaGguf(options));
  await rename(partial, path);
  return path;
}
