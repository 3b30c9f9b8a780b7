import { readFile } from "node:fs/promises";
import { defineHandler, JobError } from "runlet";
import { z } from "zod";
import { BadImageError, loadOcr, recognise } from "./ocr.js";

/** Largest picture accepted, in bytes: as base64 in the input, or downloaded from `url`. */
const MAX_IMAGE_BYTES = 16 * 1_048_576;
/** Longest a picture's download may take, its last byte included. */
const DOWNLOAD_TIMEOUT_MS = 30_000;

/**
 * One picture in, its lines of text out. The picture comes as base64 (`image`, a data: URL
 * too) or as an http(s) URL (`url`, fetched with ctx.s3.download, with or without an S3 store:
 * it refuses private and loopback addresses, bodies over MAX_IMAGE_BYTES and downloads longer
 * than DOWNLOAD_TIMEOUT_MS).
 */
const input = z
  .object({
    image: z
      .string()
      .max(Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 100)
      .optional(),
    url: z.url({ protocol: /^https?$/ }).optional(),
    /** Line crops the recogniser reads in one run; default 1 on the CPU, 8 on CUDA. */
    batchSize: z.number().int().min(1).max(64).optional(),
    /** The detector sees the picture scaled so its longer side is at most this. */
    maxSide: z.number().int().min(64).max(4096).default(960),
  })
  .refine((i) => (i.image === undefined) !== (i.url === undefined), {
    message: "give exactly one of image (base64) and url",
  });

/** `OCR_EXPECT_GPU=1` on the endpoint: a worker that would run on the CPU is unfit instead. */
function expectsGpu(): boolean {
  return ["1", "true", "yes"].includes((process.env["OCR_EXPECT_GPU"] ?? "").toLowerCase());
}

function decodeBase64(text: string): Buffer {
  const body = text.startsWith("data:") ? text.slice(text.indexOf(",") + 1) : text;
  if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(body)) throw new JobError("image is not base64");
  return Buffer.from(body, "base64");
}

export default defineHandler({
  input,
  // The model takes the cores it is given; one picture at a time keeps each job's latency low.
  concurrency: 1,
  setupTimeoutMs: 120_000,
  // The model loads once, before the worker's first take: no job waits for it, and a worker
  // whose model cannot load (or that runs on the CPU where a GPU was expected) takes no job.
  async setup({ log, progress }) {
    progress("loading the detector and the recogniser");
    const model = await loadOcr();
    log.info(
      { device: model.device, reason: model.deviceReason },
      `OCR runs on the ${model.device === "cuda" ? "GPU (CUDA)" : "CPU"}`,
    );
    if (expectsGpu() && model.device !== "cuda") {
      await model.release();
      // A failed setup pings unhealthy with check=setup and this message in its reason.
      throw new Error(`OCR_EXPECT_GPU is set but OCR runs on the CPU: ${model.deviceReason}`);
    }
    progress(`model loaded on the ${model.device}`);
    return { model, device: model.device };
  },
  // At shutdown, after the last job: the ONNX sessions' native memory (and GPU memory) goes back.
  async teardown({ model }) {
    await model.release();
  },
  async handler({ input, s3, state, signal }) {
    let image: Buffer;
    if (input.url !== undefined) {
      const got = await s3.download(input.url, { maxBytes: MAX_IMAGE_BYTES, timeoutMs: DOWNLOAD_TIMEOUT_MS });
      if (!("path" in got)) throw new Error("expected a file download");
      image = await readFile(got.path);
    } else {
      image = decodeBase64(input.image ?? "");
    }
    const { model } = state;
    try {
      const lines = await recognise(model, image, {
        ...(input.batchSize === undefined ? {} : { batchSize: input.batchSize }),
        maxSide: input.maxSide,
        signal,
      });
      return { lines, device: state.device };
    } catch (err) {
      if (err instanceof BadImageError) throw new JobError(err.message);
      throw err;
    }
  },
});
