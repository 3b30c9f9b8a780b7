import { EventEmitter, once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isRunletError } from "../../src/errors.js";
import { createJobS3, type JobS3 } from "../../src/s3/index.js";
import { NO_STORE_MESSAGE, unconfiguredJobS3 } from "../../src/s3/no-store.js";

// Issue 31: `ctx.s3.download` of an http(s) URL works with no store, with the guard, the byte cap
// and the timeout of a download with one. Both sides that see a job without a store are checked:
// the worker's light `unconfiguredJobS3` (no AWS SDK) and the S3 module resolving no store. The
// server is a real HTTP server on 127.0.0.1, so private addresses are allowed where it is fetched.

let server: Server;
let base: string;
let tmpRoot: string;
/** Responses a `/stall` request left open: ended in afterEach. */
const stalled: ServerResponse[] = [];
const opened: JobS3[] = [];
/** Emits "stall" when the server has answered a `/stall` request's first chunk. */
const stalls = new EventEmitter();

beforeAll(async () => {
  tmpRoot = await mkdtemp(join(tmpdir(), "runlet-url-download-test-"));
  server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/picture.png") {
      res.writeHead(200, { "content-type": "image/png", "content-length": "11" });
      res.end("hello bytes");
    } else if (path === "/moved") {
      res.writeHead(302, { location: "/picture.png" });
      res.end();
    } else if (path === "/stall") {
      // Headers and a first chunk, then nothing: only a timeout ends this download.
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write(Buffer.alloc(1000, 7));
      stalled.push(res);
      stalls.emit("stall");
    } else {
      res.writeHead(404);
      res.end("no such file");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.cleanup()));
  for (const res of stalled.splice(0)) res.destroy();
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  if (tmpRoot) await rm(tmpRoot, { recursive: true, force: true });
});

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

const log = pino({ enabled: false });

const sides: ReadonlyArray<[string, (allowPrivateAddresses: boolean, signal?: AbortSignal) => JobS3]> = [
  [
    "the worker's no-store ctx.s3",
    (allowPrivateAddresses, signal = new AbortController().signal) =>
      unconfiguredJobS3({ jobId: "job-u", signal, log, allowPrivateAddresses, tmpRoot }),
  ],
  [
    "the S3 module resolving no store",
    (allowPrivateAddresses, signal = new AbortController().signal) =>
      createJobS3({
        jobId: "job-u",
        s3Config: undefined,
        bucket: undefined,
        signal,
        log,
        allowPrivateAddresses,
        tmpRoot,
      }),
  ],
];

describe.each(sides)("an http(s) URL without a store, through %s", (_name, make) => {
  const s3 = (allow = true, signal?: AbortSignal) => {
    const made = make(allow, signal);
    opened.push(made);
    return made;
  };

  it("downloads to a file in the job's folder, following a redirect, and removes the folder at the job's end", async () => {
    const jobS3 = s3();
    expect(jobS3.configured).toBe(false);
    const got = await jobS3.download(`${base}/moved`);
    if (!("path" in got)) throw new Error("expected a file");
    expect(got.bytes).toBe(11);
    expect(await readFile(got.path, "utf8")).toBe("hello bytes");
    expect(dirname(dirname(got.path))).toBe(tmpRoot);
    const streamed = await jobS3.download(`${base}/picture.png`, { to: "stream" });
    if (!("stream" in streamed)) throw new Error("expected a stream");
    const chunks: Buffer[] = [];
    for await (const c of streamed.stream) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe("hello bytes");
    await jobS3.cleanup();
    expect(existsSync(dirname(got.path))).toBe(false);
    const late = await caught(jobS3.download(`${base}/picture.png`));
    expect(isRunletError(late) && late.code).toBe("RUNLET_S3_REQUEST_FAILED");
    expect((late as Error).message).toBe("ctx.s3 was used after job job-u ended");
  });

  it("refuses a loopback URL unless private addresses are allowed", async () => {
    const err = await caught(s3(false).download(`${base}/picture.png`));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_DOWNLOAD_REFUSED");
    expect((err as Error).message).toBe(
      `download of ${base}/picture.png refused: 127.0.0.1 resolves to 127.0.0.1, a private, loopback or ` +
        "link-local address; use a public URL, or, where this is intended (tests against a server on this machine or network), start the worker with RUNLET_ALLOW_PRIVATE_ADDRESSES=1 in its environment (runlet dev, an image) or allowPrivateAddresses: true in code",
    );
  });

  it("refuses a body over maxBytes before reading it, and leaves no file", async () => {
    const jobS3 = s3();
    const err = await caught(jobS3.download(`${base}/picture.png`, { maxBytes: 10 }));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_DOWNLOAD_TOO_LARGE");
    expect((err as { details?: unknown }).details).toMatchObject({ maxBytes: 10, bytes: 11 });
    const ok = await jobS3.download(`${base}/picture.png`, { maxBytes: 11 });
    if (!("path" in ok)) throw new Error("expected a file");
    expect(await readdir(dirname(ok.path))).toEqual([ok.path.split("/").pop()]);
  });

  it("fails a download that has not finished within timeoutMs, to a file or as a stream, and leaves no file", async () => {
    const jobS3 = s3();
    const err = await caught(jobS3.download(`${base}/stall?sig=secret`, { timeoutMs: 300 }));
    expect(isRunletError(err) && err.code).toBe("RUNLET_S3_DOWNLOAD_TIMEOUT");
    expect((err as Error).message).toBe(
      `download of ${base}/stall did not finish within its timeout of 300 ms: raise timeoutMs, or check the server`,
    );
    const folder = join(
      tmpRoot,
      (await readdir(tmpRoot)).find((d) => d.startsWith("runlet-job-u-")) ?? "none",
    );
    expect(await readdir(folder)).toEqual([]);
    const got = await jobS3.download(`${base}/stall`, { to: "stream", timeoutMs: 300 });
    if (!("stream" in got)) throw new Error("expected a stream");
    const streamErr = await caught(
      (async () => {
        for await (const _ of got.stream);
      })(),
    );
    expect(isRunletError(streamErr) && streamErr.code).toBe("RUNLET_S3_DOWNLOAD_TIMEOUT");
    const bad = await caught(jobS3.download(`${base}/picture.png`, { timeoutMs: 0 }));
    expect((bad as Error).message).toBe("timeoutMs must be an integer ≥ 1, got 0");
  });

  it("says what the server answered, and still needs a store for keys", async () => {
    const jobS3 = s3();
    const missing = await caught(jobS3.download(`${base}/nope.png`));
    // Issue 45: a URL's own code with the status, and none of the server's body in the message.
    expect(isRunletError(missing) && missing.code).toBe("RUNLET_URL_DOWNLOAD_HTTP");
    expect((missing as Error).message).toBe(`download of ${base}/nope.png was answered HTTP 404 (not found)`);
    expect((missing as { details?: unknown }).details).toEqual({ url: `${base}/nope.png`, status: 404 });
    // Nothing listens on a closed port: no answer at all has its own code.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const refused = await caught(jobS3.download(`http://127.0.0.1:${port}/file.bin?sig=secret`));
    expect(isRunletError(refused) && refused.code).toBe("RUNLET_URL_DOWNLOAD_FAILED");
    expect((refused as Error).message).toContain(
      `download of http://127.0.0.1:${port}/file.bin failed before an answer`,
    );
    expect((refused as Error).message).not.toContain("secret");
    for (const key of ["nope.png", "s3://bucket/nope.png"]) {
      const err = await caught(jobS3.download(key));
      expect(isRunletError(err) && err.code, key).toBe("RUNLET_S3_NOT_CONFIGURED");
      expect((err as Error).message).toBe(NO_STORE_MESSAGE);
    }
  });

  it("ends a download in flight when the job's signal fires", async () => {
    const job = new AbortController();
    const jobS3 = s3(true, job.signal);
    const served = once(stalls, "stall");
    const pending = caught(jobS3.download(`${base}/stall`));
    // The server has answered with its first chunk: the download is under way.
    await served;
    job.abort(new Error("the job was cancelled"));
    expect(((await pending) as Error).message).toBe("the job was cancelled");
  });
});
