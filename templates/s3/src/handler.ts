import { defineHandler, JobError } from "runlet";
import { z } from "zod";

/**
 * Writes a text file and hands back a link to it: the file goes to the S3-compatible store bound
 * to the job (the job's `s3Config`, else the BUCKET_* environment), and the job's output is the
 * object's reference with a presigned URL. Large results belong in a store, not in the output:
 * the platform caps a result at a few MB.
 */
const input = z.object({
  text: z.string().min(1).max(1_000_000),
  /** Repeat the text this many times: a stand-in for generating a large file. */
  repeat: z.number().int().min(1).max(10_000).default(1),
  /** Object key; runlet picks `<job id>/<random>` when omitted. */
  key: z.string().min(1).max(1024).optional(),
});

export default defineHandler({
  input,
  async handler({ input, s3, log }) {
    if (!s3.configured) {
      throw new JobError("no S3 store: send s3Config with the job or set BUCKET_ENDPOINT_URL and its keys");
    }
    const body = input.text.repeat(input.repeat);
    const ref = await s3.upload(body, {
      contentType: "text/plain; charset=utf-8",
      ...(input.key === undefined ? {} : { key: input.key }),
    });
    log.info({ key: ref.key, bytes: ref.bytes }, "uploaded");
    return { file: ref };
  },
});
