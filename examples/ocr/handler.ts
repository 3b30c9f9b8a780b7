import { readFile } from "node:fs/promises";
import { defineHandler, JobError, WorkerUnfitError } from "runlet";
import { z } from "zod";
import { BadImageError, loadOcr, type OcrModel, recognise } from "./ocr.js";

/** Largest picture accepted, in bytes: as base64 in the input, or downloaded from `url`. */
const MAX_IMAGE_BYTES = 16 * 1_048_576;

/**
 * One picture in, its lines of text out. The picture comes as base64 (`image`, a data: URL
 * too) or as an http(s) URL (`url`, fetched with ctx.s3.download, which refuses private and
 * loopback addresses; it needs an S3 store on the job or the endpoint).
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

/**
 * The model, loaded once per process. Loading is started by the health check, which runlet runs
 * before the worker's first take, so no job waits for it and a worker whose model cannot load
 * takes no job. (With `setup` in the handler API this becomes `setup() { return { model } }`.)
 */
let loading: Promise<OcrModel> | undefined;
function model(log: { info(o: object, m: string): void }): Promise<OcrModel> {
  loading ??= loadOcr().then((m) => {
    log.info(
      { device: m.device, reason: m.deviceReason },
      `OCR runs on the ${m.device === "cuda" ? "GPU (CUDA)" : "CPU"}`,
    );
    return m;
  });
  return loading;
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
  healthCheckTimeoutMs: 120_000,
  async healthCheck({ log }) {
    const m = await model(log);
    if (expectsGpu() && m.device !== "cuda")
      throw new WorkerUnfitError("gpu", `OCR_EXPECT_GPU is set but OCR runs on the CPU: ${m.deviceReason}`);
    return true;
  },
  async handler({ input, s3, log, signal }) {
    let image: Buffer;
    if (input.url !== undefined) {
      const got = await s3.download(input.url, { maxBytes: MAX_IMAGE_BYTES });
      if (!("path" in got)) throw new Error("expected a file download");
      image = await readFile(got.path);
    } else {
      image = decodeBase64(input.image ?? "");
    }
    const m = await model(log);
    try {
      const lines = await recognise(m, image, {
        ...(input.batchSize === undefined ? {} : { batchSize: input.batchSize }),
        maxSide: input.maxSide,
        signal,
      });
      return { lines, device: m.device };
    } catch (err) {
      if (err instanceof BadImageError) throw new JobError(err.message);
      throw err;
    }
  },
});
