import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { inspect } from "node:util";
import { HeadObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { createLogger } from "../../src/log/index.js";
import type { S3Config } from "../../src/protocol/index.js";
import { createJobS3, type JobS3, type JobS3Options } from "../../src/s3/index.js";
import { useS3rver } from "../support/use-s3rver.js";
import { waitForAsync } from "../support/wait-for.js";

const BUCKET = "runlet-test";
const s3rver = useS3rver(BUCKET);
let tmpRoot: string;
const opened: JobS3[] = [];

beforeAll(async () => {
  tmpRoot = await mkdtemp(join(tmpdir(), "runlet-s3-test-"));
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.cleanup()));
});
afterAll(async () => {
  if (tmpRoot) await rm(tmpRoot, { recursive: true, force: true });
});

/** A logger whose every line is kept, to search for secrets. */
function capturingLogger() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString("utf8"));
      cb();
    },
  });
  return { log: createLogger({ platform: true, level: "trace", destination }), lines };
}

function s3Config(overrides: Partial<S3Config> = {}): S3Config {
  return {
    accessId: s3rver.accessKeyId,
    accessSecret: s3rver.secretAccessKey,
    bucketName: BUCKET,
    endpointUrl: s3rver.endpoint,
    ...overrides,
  };
}

/** The operator's BUCKET_* store: s3rver, with the bucket as the endpoint's first path segment. */
function envStore(): JobS3Options["bucket"] {
  return {
    endpointUrl: `${s3rver.endpoint}/${BUCKET}`,
    accessKeyId: s3rver.accessKeyId,
    secretAccessKey: s3rver.secretAccessKey,
  };
}

function jobS3(overrides: Partial<JobS3Options> = {}): JobS3 {
  const s3 = createJobS3({
    jobId: "job-1",
    s3Config: s3Config(),
    bucket: undefined,
    signal: new AbortController().signal,
    log: capturingLogger().log,
    allowPrivateAddresses: true,
    tmpRoot,
    ...overrides,
  });
  opened.push(s3);
  return s3;
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

describe("upload", () => {
  it("uploads a string under the job id and returns a presigned URL that plain fetch reads", async () => {
    const s3 = jobS3();
    const ref = await s3.upload("hello, runlet");
    expect(ref.bucket).toBe(BUCKET);
    expect(ref.key).toMatch(/^job-1\/[0-9a-f-]{36}$/);
    expect(ref.bytes).toBe(13);
    const url = new URL(ref.url);
    expect(url.origin).toBe(s3rver.endpoint);
    expect(url.pathname).toBe(`/${BUCKET}/${ref.key}`);
    expect(url.searchParams.get("X-Amz-Expires")).toBe("604800");
    const res = await fetch(ref.url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await res.text()).toBe("hello, runlet");
  });

  it("uses the given key, content type and presign expiry", async () => {
    const s3 = jobS3({ presignExpiresSec: 3600 });
    const ref = await s3.upload(Buffer.from([1, 2, 3]), {
      key: "custom/k.bin",
      contentType: "application/x-demo",
    });
    expect(ref).toMatchObject({ bucket: BUCKET, key: "custom/k.bin", bytes: 3 });
    expect(new URL(ref.url).searchParams.get("X-Amz-Expires")).toBe("3600");
    const head = await s3rver.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "custom/k.bin" }));
    expect(head.ContentType).toBe("application/x-demo");
    expect(head.ContentLength).toBe(3);
  });

  it("uploads 50 MB in parts and downloads it back byte for byte", async () => {
    const s3 = jobS3();
    const body = randomBytes(50 * 1_048_576);
    s3rver.operations.length = 0;
    const ref = await s3.upload(body);
    expect(ref.bytes).toBe(body.length);
    const ops = s3rver.operations.filter((o) => o.endsWith(ref.key)).map((o) => o.split(" ")[0]);
    // 8 MiB parts: 7 of them, then the completion.
    expect(ops).toEqual([
      "CreateMultipartUpload",
      ...Array.from({ length: 7 }, () => "UploadPart"),
      "CompleteMultipartUpload",
    ]);
    const got = await s3.download(ref.key);
    if (!("path" in got)) throw new Error("expected a file");
    expect(got.bytes).toBe(body.length);
    expect(sha256(await readFile(got.path))).toBe(sha256(body));
  });

  it("uploads a file by path with a content type from its extension and a key keeping the extension", async () => {
    const s3 = jobS3();
    const file = join(tmpRoot, "picture.bmp");
    const data = randomBytes(4096);
    await writeFile(file, data);
    const ref = await s3.upload({ path: file });
    expect(ref.key).toMatch(/^job-1\/[0-9a-f-]{36}\.bmp$/);
    expect(ref.bytes).toBe(4096);
    const res = await fetch(ref.url);
    expect(res.headers.get("content-type")).toBe("image/bmp");
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
  });

  it("uploads a readable stream of unknown length and counts its bytes", async () => {
    const s3 = jobS3();
    const pieces = Array.from({ length: 12 }, () => randomBytes(1_048_576)); // 12 MiB: two parts
    const ref = await s3.upload(Readable.from(pieces));
    expect(ref.bytes).toBe(12 * 1_048_576);
    const got = await s3.download(ref.key, { to: "stream" });
    if (!("stream" in got)) throw new Error("expected a stream");
    const chunks: Buffer[] = [];
    for await (const c of got.stream) chunks.push(c as Buffer);
    expect(sha256(Buffer.concat(chunks))).toBe(sha256(Buffer.concat(pieces)));
  });

  it("rejects with the body's own error when the stream being uploaded fails, leaving no multipart upload", async () => {
    const s3 = jobS3();
    const boom = new Error("camera unplugged");
    let n = 0;
    const body = new Readable({
      read() {
        n += 1;
        if (n <= 10) this.push(randomBytes(1_048_576));
        else this.destroy(boom);
      },
    });
    expect(await caught(s3.upload(body, { key: "job-1/broken.bin" }))).toBe(boom);
    expect(await s3rver.listMultipartUploads(BUCKET)).toEqual([]);
  });

  it("offloads an output's JSON to <job id>/output.json", async () => {
    const s3 = jobS3({ jobId: "job-offload" });
    const json = JSON.stringify({ text: "é".repeat(1000) });
    const ref = await s3.offloadOutput(json);
    expect(ref).toMatchObject({
      bucket: BUCKET,
      key: "job-offload/output.json",
      bytes: Buffer.byteLength(json),
    });
    const res = await fetch(ref.url);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(json);
  });

  it("aborts the multipart upload on the store when the job's signal fires mid-upload", async () => {
    const job = new AbortController();
    const s3 = jobS3({ jobId: "job-abort", signal: job.signal });
    const reason = new Error("job timed out");
    let sent = 0;
    // A slow producer: 8 MiB parts, one every time the consumer asks, never ending on its own.
    const body = new Readable({
      read() {
        sent += 1;
        if (sent <= 40) setTimeout(() => this.push(randomBytes(1_048_576)), 5);
      },
    });
    const upload = s3.upload(body, { key: "job-abort/big.bin" });
    await waitForAsync(
      "a multipart upload to start",
      async () => (await s3rver.listMultipartUploads(BUCKET)).length > 0,
    );
    job.abort(reason);
    expect(await caught(upload)).toBe(reason);
    expect(await s3rver.listMultipartUploads(BUCKET)).toEqual([]);
    const head = await caught(
      s3rver.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "job-abort/big.bin" })),
    );
    expect((head as { name?: string }).name).toBe("NotFound");
  });
});

describe("without a store", () => {
  it("reports configured false and throws RUNLET_S3_NOT_CONFIGURED saying how to configure one", async () => {
    const s3 = jobS3({ s3Config: undefined, bucket: undefined });
    expect(s3.configured).toBe(false);
    // An http(s) URL needs no store (test/s3/url-download.test.ts); keys and s3:// URLs do.
    for (const call of [
      () => s3.upload("x"),
      () => s3.download("some/key"),
      () => s3.download("s3://bucket/some/key"),
      () => s3.offloadOutput("{}"),
    ]) {
      const err = await caught(call());
      expect(isRunletError(err) && err.code).toBe("RUNLET_S3_NOT_CONFIGURED");
      expect((err as Error).message).toBe(
        "ctx.s3 has no store: send the job with s3Config {accessId, accessSecret, bucketName, endpointUrl}, " +
          "or set BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint",
      );
    }
    await expect(s3.cleanup()).resolves.toBeUndefined();
  });

  it("rejects a malformed job s3Config instead of falling back to the environment store", async () => {
    const s3 = jobS3({
      s3Config: { accessId: "", accessSecret: "x", bucketName: "b", endpointUrl: "ftp://x" } as S3Config,
      bucket: { endpointUrl: s3rver.endpoint, accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    expect(s3.configured).toBe(false);
    const err = await caught(s3.upload("x"));
    expect(isRunletError(err) && err.code).toBe("RUNLET_CONFIG_INVALID");
    expect((err as Error).message).toBe(
      "the job's s3Config is invalid: s3Config.accessId must be a non-empty string",
    );
  });
});

describe("the BUCKET_* environment store", () => {
  it("is used when the job has no s3Config, with the bucket from the endpoint's first path segment", async () => {
    const s3 = jobS3({
      s3Config: undefined,
      bucket: {
        endpointUrl: `${s3rver.endpoint}/${BUCKET}`,
        accessKeyId: "S3RVER",
        secretAccessKey: "S3RVER",
      },
    });
    expect(s3.configured).toBe(true);
    const ref = await s3.upload("from env");
    expect(ref.bucket).toBe(BUCKET);
    expect(await (await fetch(ref.url)).text()).toBe("from env");
  });

  it("loses to the job's s3Config", async () => {
    await s3rver.createBucket("runlet-other");
    const s3 = jobS3({
      s3Config: s3Config({ bucketName: "runlet-other" }),
      bucket: {
        endpointUrl: `${s3rver.endpoint}/${BUCKET}`,
        accessKeyId: "S3RVER",
        secretAccessKey: "S3RVER",
      },
    });
    expect((await s3.upload("x")).bucket).toBe("runlet-other");
  });
});

describe("credentials", () => {
  const SECRET = "wrong-secret-5f2d9c1e8a7b";

  /** Every way a test can see an error or a log line, joined, to search for the secret. */
  function everything(err: unknown, lines: string[]): string {
    return [
      JSON.stringify(err),
      JSON.stringify((err as { details?: unknown }).details),
      inspect(err, { depth: 8 }),
      String(err),
      (err as Error).stack ?? "",
      lines.join(""),
    ].join("\n");
  }

  it("says the store rejected the credentials of an unknown access id, naming it and the endpoint, never the secret", async () => {
    const { log, lines } = capturingLogger();
    const s3 = jobS3({ s3Config: s3Config({ accessId: "NOT-A-KEY", accessSecret: SECRET }), log });
    const err = await caught(s3.upload("x", { key: "job-1/creds.txt" }));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
    expect((err as Error).message).toBe(
      `the store at ${s3rver.endpoint} rejected the credentials of access id "NOT-A-KEY" (InvalidAccessKeyId) on upload: ` +
        "check s3Config.accessId and s3Config.accessSecret",
    );
    expect((err as { details?: unknown }).details).toEqual({
      operation: "upload",
      endpoint: s3rver.endpoint,
      bucket: BUCKET,
      key: "job-1/creds.txt",
      accessId: "NOT-A-KEY",
      status: 403,
      storeCode: "InvalidAccessKeyId",
    });
    const keyErr = await caught(s3.download("job-1/creds.txt"));
    expect((keyErr as Error).message).toContain('rejected the credentials of access id "NOT-A-KEY"');
    expect(everything(err, lines) + everything(keyErr, lines)).not.toContain(SECRET);
  });

  it("says the store rejected the credentials of a wrong secret (SignatureDoesNotMatch), never naming the secret", async () => {
    // s3rver 3.7 accepts any SigV4 signature of a known access id, so a wrong secret is not
    // detectable there; this store is a plain HTTP server answering exactly what S3 answers then.
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(403, { "content-type": "application/xml" });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request ' +
            "signature we calculated does not match the signature you provided. Check your key and signing " +
            "method.</Message><AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId></Error>",
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const { log, lines } = capturingLogger();
      const s3 = jobS3({
        s3Config: undefined,
        bucket: { endpointUrl: `${endpoint}/${BUCKET}`, accessKeyId: "AKIDEXAMPLE", secretAccessKey: SECRET },
        log,
      });
      const err = await caught(s3.upload("x", { key: "job-1/creds.txt" }));
      expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
      expect((err as Error).message).toBe(
        `the store at ${endpoint} rejected the credentials of access id "AKIDEXAMPLE" (SignatureDoesNotMatch) on upload: ` +
          "check BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY",
      );
      expect(everything(err, lines)).not.toContain(SECRET);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("store errors", () => {
  it("says the bucket is missing and how to name one", async () => {
    const s3 = jobS3({ s3Config: s3Config({ bucketName: "no-such-bucket" }) });
    const err = await caught(s3.upload("x"));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
    expect((err as Error).message).toBe(
      `the store at ${s3rver.endpoint} has no bucket "no-such-bucket": create it, or fix s3Config.bucketName`,
    );
  });

  it("says the store cannot be reached", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise((resolve) => server.close(resolve)); // nothing listens there now
    const endpoint = `http://127.0.0.1:${port}`;
    const s3 = jobS3({ s3Config: s3Config({ endpointUrl: endpoint }) });
    const err = await caught(s3.upload("x"));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
    expect((err as Error).message).toBe(
      `could not reach the store at ${endpoint} (ECONNREFUSED) on upload: check the endpoint URL and the network`,
    );
  });
});

describe("download", () => {
  it("refuses URLs on loopback, private and link-local addresses unless allowed", async () => {
    const ref = await jobS3().upload("private data");
    const s3 = jobS3({ allowPrivateAddresses: false });
    const port = new URL(s3rver.endpoint).port;
    for (const url of [
      ref.url,
      `http://localhost:${port}/${BUCKET}/${ref.key}`,
      `http://[::1]:${port}/x`,
      "http://169.254.169.254/latest/meta-data/",
      "http://10.1.2.3/x",
      "http://[::ffff:127.0.0.1]/x",
    ]) {
      const err = await caught(s3.download(url));
      expect(isRunletError(err) && err.code, url).toBe("RUNLET_S3_DOWNLOAD_REFUSED");
      expect((err as Error).message).not.toContain("X-Amz-Signature");
    }
  });

  it("fetches keys of the bound bucket with GetObject: from the operator's store whatever its address, from a job's s3Config on loopback only when private addresses are allowed", async () => {
    const ref = await jobS3().upload("by key");
    const got = await jobS3({
      allowPrivateAddresses: false,
      s3Config: undefined,
      bucket: envStore(),
    }).download(ref.key);
    if (!("path" in got)) throw new Error("expected a file");
    expect(await readFile(got.path, "utf8")).toBe("by key");
    // issue 32: the job's own s3Config is chosen by its sender, and held to the rule of URLs.
    const err = await caught(jobS3({ allowPrivateAddresses: false }).download(ref.key));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_ENDPOINT_REFUSED");
  });

  it("refuses a body over maxBytes and leaves no partial file", async () => {
    const s3 = jobS3();
    const ref = await s3.upload(randomBytes(10_000));
    const err = await caught(s3.download(ref.url, { maxBytes: 9_999 }));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_DOWNLOAD_TOO_LARGE");
    expect((err as { details?: unknown }).details).toMatchObject({ maxBytes: 9_999, bytes: 10_000 });
    const byKey = await caught(s3.download(ref.key, { maxBytes: 100 }));
    expect(isRunletError(byKey) && byKey.code).toBe("RUNLET_S3_DOWNLOAD_TOO_LARGE");
    const exact = await s3.download(ref.key, { maxBytes: 10_000 });
    expect("path" in exact && exact.bytes).toBe(10_000);
    if (!("path" in exact)) throw new Error("expected a file");
    expect(await readdir(dirname(exact.path))).toEqual([exact.path.split("/").pop()]);
  });

  it("enforces the cap while reading a stream whose length was not announced", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" }); // chunked: no content-length
      res.write(Buffer.alloc(4096, 1));
      res.write(Buffer.alloc(4096, 2));
      res.end(Buffer.alloc(4096, 3));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/blob`;
      const s3 = jobS3();
      const got = await s3.download(url, { to: "stream", maxBytes: 5000 });
      if (!("stream" in got)) throw new Error("expected a stream");
      let read = 0;
      const err = await caught(
        (async () => {
          for await (const c of got.stream) read += (c as Buffer).length;
        })(),
      );
      expect(isRunletError(err) && err.code).toBe("RUNLET_S3_DOWNLOAD_TOO_LARGE");
      expect(read).toBeLessThanOrEqual(5000);
      const whole = await s3.download(url, { maxBytes: 12_288 });
      expect("path" in whole && whole.bytes).toBe(12_288);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("says which key is missing", async () => {
    const err = await caught(jobS3().download("job-1/nope.bin"));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
    expect((err as Error).message).toBe(
      `the store at ${s3rver.endpoint} has no object "job-1/nope.bin" in bucket "${BUCKET}"`,
    );
  });
});

describe("cleanup", () => {
  it("removes the job's temporary folder, is idempotent, and ends the store's use", async () => {
    const s3 = jobS3();
    const ref = await s3.upload("temp");
    const got = await s3.download(ref.key);
    if (!("path" in got)) throw new Error("expected a file");
    const folder = dirname(got.path);
    expect(dirname(folder)).toBe(tmpRoot);
    expect(existsSync(got.path)).toBe(true);
    const first = s3.cleanup();
    expect(s3.cleanup()).toBe(first);
    await first;
    expect(existsSync(folder)).toBe(false);
    const err = await caught(s3.upload("late"));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_REQUEST_FAILED");
  });
});
