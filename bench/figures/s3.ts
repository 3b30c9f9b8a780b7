import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createJobS3 } from "../../src/s3/index.js";
import { startS3rver } from "../../test/s3/s3rver.js";
import type { BenchOptions } from "../options.js";
import { type Figure, figure, repeat } from "../stats.js";

const MB = 1_000_000;
const BUCKET = "runlet-bench";

/** S3: upload and download MB/s of one body through `ctx.s3` (createJobS3) against s3rver on loopback. */
export async function measureS3(options: BenchOptions): Promise<Figure[]> {
  const s3rver = await startS3rver();
  const tmpRoot = await mkdtemp(join(tmpdir(), "runlet-bench-s3-"));
  try {
    await s3rver.createBucket(BUCKET);
    const body = randomBytes(options.s3.bytes);
    const runs = await repeat(options.repetitions, async (run) => {
      const s3 = createJobS3({
        jobId: `bench-${run}`,
        s3Config: {
          accessId: s3rver.accessKeyId,
          accessSecret: s3rver.secretAccessKey,
          bucketName: BUCKET,
          endpointUrl: s3rver.endpoint,
        },
        bucket: undefined,
        signal: new AbortController().signal,
        log: pino({ level: "silent" }),
        allowPrivateAddresses: true,
        tmpRoot,
      });
      try {
        let started = performance.now();
        const ref = await s3.upload(body, { key: `bench/${run}.bin` });
        const upMs = performance.now() - started;
        started = performance.now();
        const got = await s3.download(ref.key, { to: "file" });
        const downMs = performance.now() - started;
        if (!("bytes" in got) || got.bytes !== body.length)
          throw new Error("the S3 download came back short");
        return { up: body.length / MB / (upMs / 1000), down: body.length / MB / (downMs / 1000) };
      } finally {
        await s3.cleanup();
      }
    });
    const size = `${Math.round(options.s3.bytes / MB)} MB`;
    return [
      figure(
        "s3.upload",
        `S3 upload, ${size} (s3rver, loopback)`,
        "MB/s",
        runs.map((r) => r.up),
      ),
      figure(
        "s3.download",
        `S3 download, ${size} (s3rver, loopback)`,
        "MB/s",
        runs.map((r) => r.down),
      ),
    ];
  } finally {
    await s3rver.close();
    await rm(tmpRoot, { recursive: true, force: true });
  }
}
