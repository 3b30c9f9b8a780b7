import { readFile } from "node:fs/promises";
import { defineHandler, JobError } from "runlet";
import { z } from "zod";
import { decodeBmp, encodeBmp, greyscale, testCard } from "./bmp.js";

/**
 * Turns a picture grey and hands it back through S3. With `source` (a URL or a key of the job's
 * bucket) it downloads a 24-bit BMP into the job's temporary folder, which runlet removes when the
 * job ends; without one it renders a colour test card of `width`×`height`. Both the colour and the
 * grey picture are uploaded: pictures are far too large for a job's output, which carries only
 * their references (bucket, key, presigned URL, bytes).
 */
const input = z.object({
  source: z.string().min(1).optional(),
  width: z.number().int().min(1).max(4096).default(256),
  height: z.number().int().min(1).max(4096).default(256),
  /** Refuse sources larger than this. */
  maxSourceBytes: z
    .number()
    .int()
    .min(1)
    .max(256 * 1_048_576)
    .default(64 * 1_048_576),
});

export default defineHandler({
  input,
  async handler({ input, s3, log, job }) {
    if (!s3.configured) {
      throw new JobError(
        "this endpoint needs an S3 store: send s3Config with the job or set BUCKET_* on the endpoint",
      );
    }
    let colour: Buffer;
    if (input.source === undefined) {
      colour = encodeBmp(testCard(input.width, input.height));
    } else {
      const got = await s3.download(input.source, { maxBytes: input.maxSourceBytes });
      if (!("path" in got)) throw new Error("expected a file download");
      colour = await readFile(got.path);
    }
    let grey: Buffer;
    try {
      grey = encodeBmp(greyscale(decodeBmp(colour)));
    } catch (err) {
      throw new JobError(`source is not a usable picture: ${(err as Error).message}`);
    }
    const [original, result] = await Promise.all([
      s3.upload(colour, { key: `${job.id}/colour.bmp`, contentType: "image/bmp" }),
      s3.upload(grey, { key: `${job.id}/grey.bmp`, contentType: "image/bmp" }),
    ]);
    log.info({ bytes: result.bytes }, "greyscaled a picture");
    return { original, grey: result };
  },
});
