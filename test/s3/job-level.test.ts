import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { HeadObjectCommand } from "@aws-sdk/client-s3";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler, type HandlerDefinition, startWorker } from "../../src/index.js";
import type { S3Config } from "../../src/protocol/index.js";
import { inMemoryHarness } from "../support/inject.js";
import { useS3rver } from "../support/use-s3rver.js";

/**
 * Jobs through the local harness and a real worker, with s3rver as the store. s3rver 3.7 checks
 * the access id but not SigV4 signatures, so the jobs use a secret of their own, which lets these
 * tests search every log line and job record for it.
 */
const BUCKET = "runlet-jobs";
const SECRET = "job-secret-6c1f0e9b2a";
const s3rver = useS3rver(BUCKET);

function s3Config(): S3Config {
  return { accessId: "S3RVER", accessSecret: SECRET, bucketName: BUCKET, endpointUrl: s3rver.endpoint };
}

/** A harness with one worker running `definition`; every worker log line is kept. */
async function run(
  definition: HandlerDefinition,
  options: { maxResultBytes?: number; env?: Record<string, string> } = {},
) {
  const lines: string[] = [];
  const h: Harness = inMemoryHarness({ takeTimeoutMs: 300 });
  const worker = await startWorker(definition, {
    env: { ...h.workerEnv("local"), ...options.env },
    connect: () => h.connect(),
    logDestination: new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString("utf8"));
        cb();
      },
    }),
    takeTimeoutMs: 300,
    // The jobs' s3Config names s3rver on loopback, which a job may name only with this opt-in.
    allowPrivateAddresses: true,
    ...(options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes }),
  });
  return {
    h,
    lines,
    async [Symbol.asyncDispose]() {
      await worker.close();
      await h.close();
    },
  };
}

const uploadsAFile = defineHandler({
  input: z.object({ text: z.string() }),
  async handler({ input, s3, job }) {
    const file = join(tmpdir(), `runlet-${job.id}.txt`);
    await writeFile(file, input.text);
    return { file: await s3.upload({ path: file }) };
  },
});

describe("jobs with S3", () => {
  it("runs a job whose handler writes a file with ctx.s3.upload and returns its presigned URL", async () => {
    await using ctx = await run(uploadsAFile);
    const id = ctx.h.enqueue("local", { input: { text: "written by a job" }, s3Config: s3Config() });
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    const file = (job.output as { file: { bucket: string; key: string; url: string; bytes: number } }).file;
    expect(file).toMatchObject({ bucket: BUCKET, bytes: 16 });
    expect(file.key).toMatch(new RegExp(`^${id}/[0-9a-f-]{36}\\.txt$`));
    const res = await fetch(file.url);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await res.text()).toBe("written by a job");
    expect(JSON.stringify(job) + ctx.lines.join("")).not.toContain(SECRET);
  });

  it("uses the BUCKET_* store when the job carries no s3Config", async () => {
    await using ctx = await run(uploadsAFile, {
      env: {
        BUCKET_ENDPOINT_URL: `${s3rver.endpoint}/${BUCKET}`,
        BUCKET_ACCESS_KEY_ID: "S3RVER",
        BUCKET_SECRET_ACCESS_KEY: SECRET,
      },
    });
    const id = ctx.h.enqueue("local", { input: { text: "env store" } });
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    const file = (job.output as { file: { url: string; bucket: string } }).file;
    expect(file.bucket).toBe(BUCKET);
    expect(await (await fetch(file.url)).text()).toBe("env store");
    expect(JSON.stringify(job) + ctx.lines.join("")).not.toContain(SECRET);
  });

  it("offloads an output over maxResultBytes and posts {s3: {bucket, key, url, bytes}} instead", async () => {
    const big = defineHandler({
      input: z.object({ n: z.number() }),
      handler: ({ input }) => ({ blob: "x".repeat(input.n) }),
    });
    await using ctx = await run(big, { maxResultBytes: 2_000 });
    const id = ctx.h.enqueue("local", { input: { n: 5_000 }, s3Config: s3Config() });
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    const expected = JSON.stringify({ blob: "x".repeat(5_000) });
    const ref = (job.output as { s3: { bucket: string; key: string; url: string; bytes: number } }).s3;
    expect(Object.keys(job.output as object)).toEqual(["s3"]);
    expect(ref).toMatchObject({
      bucket: BUCKET,
      key: `${id}/output.json`,
      bytes: Buffer.byteLength(expected),
    });
    const res = await fetch(ref.url);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(expected);
    expect(JSON.stringify(job) + ctx.lines.join("")).not.toContain(SECRET);
  });

  it("aborts the multipart upload of a job that runs past its deadline, leaving none open on the store", async () => {
    const endless = defineHandler({
      input: z.object({}),
      async handler({ s3, job }) {
        let n = 0;
        const body = new Readable({
          read() {
            n += 1;
            setTimeout(() => this.push(Buffer.alloc(1_048_576, n % 256)), 10);
          },
        });
        return s3.upload(body, { key: `${job.id}/endless.bin` });
      },
    });
    await using ctx = await run(endless);
    const id = ctx.h.enqueue("local", {
      input: {},
      s3Config: s3Config(),
      policy: { executionTimeout: 3_000 },
    });
    await expect
      .poll(async () => (await s3rver.listMultipartUploads(BUCKET)).map((u) => u.key), {
        timeout: 3_000,
        interval: 25,
      })
      .toEqual([`${id}/endless.bin`]);
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("TIMED_OUT");
    await expect
      .poll(async () => (await s3rver.listMultipartUploads(BUCKET)).length, { timeout: 10_000, interval: 50 })
      .toBe(0);
    const head = await s3rver.client
      .send(new HeadObjectCommand({ Bucket: BUCKET, Key: `${id}/endless.bin` }))
      .catch((e: { name?: string }) => e.name);
    expect(head).toBe("NotFound");
  });

  it("fails a job that uses ctx.s3 without a store, saying how to configure one", async () => {
    await using ctx = await run(uploadsAFile);
    const id = ctx.h.enqueue("local", { input: { text: "nowhere to go" } });
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    const report = JSON.parse(job.error ?? "{}") as { error_type?: string; error_message?: string };
    expect(report.error_type).toBe("RunletError");
    // The worker words this one itself (it skips loading the AWS SDK for jobs without a store);
    // what matters is that it says both ways to configure a store.
    expect(report.error_message).toMatch(/^ctx\.s3 (has no|needs a) store: send (the job with )?s3Config/);
    expect(report.error_message).toContain(
      "BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY",
    );
  });

  it("fails a job with a clear message when the store rejects its credentials, never naming the secret", async () => {
    await using ctx = await run(uploadsAFile);
    const id = ctx.h.enqueue("local", {
      input: { text: "x" },
      s3Config: { ...s3Config(), accessId: "NOT-A-KEY" },
    });
    const job = await ctx.h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    const report = JSON.parse(job.error ?? "{}") as { error_message?: string };
    expect(report.error_message).toBe(
      // The job's s3Config keys leave the worker scrubbed, the access id too (issue 51, item 4).
      `the store at ${s3rver.endpoint} rejected the credentials of access id "[redacted]" (InvalidAccessKeyId) ` +
        "on upload: check s3Config.accessId and s3Config.accessSecret",
    );
    expect(JSON.stringify(job) + ctx.lines.join("")).not.toContain(SECRET);
  });
});
