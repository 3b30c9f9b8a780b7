import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler, type HandlerOptions } from "../../src/index.js";
import { createJobS3 } from "../../src/s3/index.js";
import { NO_STORE_MESSAGE } from "../../src/s3/no-store.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { useS3rver } from "../support/use-s3rver.js";
import { memoryHarness, workerFor } from "../support/workers.js";

// ctx.s3's settings (allowPrivateAddresses, presignExpiresSec, tmpRoot, BUCKET_NAME) reach the S3
// module from the worker's and the handler's options, in-process and in isolation threads.
// s3rver is the store; a plain HTTP server on 127.0.0.1 is the "private" URL a job downloads.
// The worker reaches the harness in memory: downloads use sockets either way, the platform's
// routes are not the subject here.

const BUCKET = "runlet-worker-options";
const NAMED_BUCKET = "named-by-env";
const threadFixture = fileURLToPath(new URL("../fixtures/s3-thread.ts", import.meta.url));
const urlThreadFixture = fileURLToPath(new URL("../fixtures/url-download-thread.ts", import.meta.url));
const s3rver = useS3rver(BUCKET, NAMED_BUCKET);
let files: Server;
let fileUrl: string;

beforeAll(async () => {
  files = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("served from loopback");
  });
  files.listen(0, "127.0.0.1");
  await once(files, "listening");
  fileUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}/file.txt`;
});
afterAll(async () => {
  files?.close();
});

const s3Config = () => ({
  accessId: "S3RVER",
  accessSecret: "S3RVER",
  bucketName: BUCKET,
  endpointUrl: s3rver.endpoint,
});

/** Downloads input.url, uploads what it read, returns both (the same work as the thread fixture). */
function downloader(options: Partial<HandlerOptions<z.ZodType>> = {}) {
  return defineHandler({
    ...options,
    input: z.object({ url: z.string() }),
    async handler({ input, s3 }) {
      const got = (await s3.download(input.url)) as { path: string; bytes: number };
      const text = await readFile(got.path, "utf8");
      const ref = await s3.upload(text);
      return { text, url: ref.url, bucket: ref.bucket, path: got.path };
    },
  });
}

async function runOne(h: Harness, withStore = true) {
  const id = h.enqueue("local", { input: { url: fileUrl }, ...(withStore ? { s3Config: s3Config() } : {}) });
  return h.waitForJob(id, { timeoutMs: THREAD_START_MS });
}

function expiresOf(url: string): string | null {
  return new URL(url).searchParams.get("X-Amz-Expires");
}

function errorMessage(error: string | undefined): string {
  // A refused or failed download is a plain `<code>: <message>` (issue 54, item 4); others are a report.
  if (error?.startsWith("RUNLET_")) return error.slice(error.indexOf(": ") + 2);
  return (JSON.parse(error ?? "{}") as { error_message?: string }).error_message ?? "";
}

describe("ctx.s3 settings from the worker and the handler", () => {
  it("refuses a download from a loopback URL by default", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, downloader());
    const job = await runOne(h);
    expect(job.status).toBe("FAILED");
    // The caller's fault: a plain error with its code, no traceback report (issue 54, item 4).
    expect(job.error).toBe(
      `RUNLET_S3_DOWNLOAD_REFUSED: download of ${fileUrl} refused: 127.0.0.1 resolves to 127.0.0.1, a private, loopback or link-local ` +
        "address; use a public URL, or, where this is intended (tests against a server on this machine or network), start the worker with RUNLET_ALLOW_PRIVATE_ADDRESSES=1 in its environment (runlet dev, an image) or allowPrivateAddresses: true in code",
    );
  });

  it("downloads from loopback with the worker's allowPrivateAddresses, and presigns for the default 7 days", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, downloader(), { allowPrivateAddresses: true });
    const job = await runOne(h);
    expect(job.status).toBe("COMPLETED");
    const out = job.output as { text: string; url: string; bucket: string };
    expect(out.text).toBe("served from loopback");
    expect(expiresOf(out.url)).toBe("604800");
    expect(await (await fetch(out.url)).text()).toBe("served from loopback");
  });

  it("takes the handler's allowPrivateAddresses and presignExpiresSec, and lets the worker's options win", async () => {
    const handler = downloader({ allowPrivateAddresses: true, presignExpiresSec: 900 });
    {
      await using h = memoryHarness();
      await using _w = await workerFor(h, handler);
      const job = await runOne(h);
      expect(job.status).toBe("COMPLETED");
      expect(expiresOf((job.output as { url: string }).url)).toBe("900");
    }
    {
      await using h = memoryHarness();
      await using _w = await workerFor(h, handler, { presignExpiresSec: 60 });
      const job = await runOne(h);
      expect(expiresOf((job.output as { url: string }).url)).toBe("60");
    }
    {
      await using h = memoryHarness();
      await using _w = await workerFor(h, handler, { allowPrivateAddresses: false });
      const job = await runOne(h);
      expect(job.status).toBe("FAILED");
      expect(errorMessage(job.error)).toContain("refused: 127.0.0.1 resolves to 127.0.0.1");
    }
  });

  it("puts a job's downloads under the worker's tmpRoot", async () => {
    const { mkdtemp, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const root = await mkdtemp(join(tmpdir(), "runlet-tmproot-"));
    try {
      await using h = memoryHarness();
      await using _w = await workerFor(h, downloader(), { allowPrivateAddresses: true, tmpRoot: root });
      const job = await runOne(h);
      expect(job.status).toBe("COMPLETED");
      const path = (job.output as { path: string }).path;
      expect(path.startsWith(`${root}/runlet-`)).toBe(true);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it(
    "passes the settings into isolation threads",
    async () => {
      {
        await using h = memoryHarness();
        await using _w = await workerFor(h, (await import(threadFixture)).default, {
          handlerModule: threadFixture,
        });
        const job = await runOne(h);
        expect(job.status).toBe("FAILED");
        expect(errorMessage(job.error)).toContain("refused: 127.0.0.1 resolves to 127.0.0.1");
      }
      {
        await using h = memoryHarness();
        await using _w = await workerFor(h, (await import(threadFixture)).default, {
          handlerModule: threadFixture,
          allowPrivateAddresses: true,
        });
        const job = await runOne(h);
        expect(job.status).toBe("COMPLETED");
        const out = job.output as { text: string; url: string };
        expect(out.text).toBe("served from loopback");
        expect(expiresOf(out.url)).toBe("1234");
      }
    },
    THREAD_TEST_MS,
  );

  it("uses BUCKET_NAME as the bucket of the BUCKET_* store", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, downloader(), {
      allowPrivateAddresses: true,
      env: {
        ...h.workerEnv("local"),
        RUNPOD_ENDPOINT_ID: "local",
        BUCKET_ENDPOINT_URL: s3rver.endpoint,
        BUCKET_ACCESS_KEY_ID: "S3RVER",
        BUCKET_SECRET_ACCESS_KEY: "S3RVER",
        BUCKET_NAME: NAMED_BUCKET,
      },
    });
    const job = await runOne(h, false);
    expect(job.status).toBe("COMPLETED");
    expect((job.output as { bucket: string }).bucket).toBe(NAMED_BUCKET);
  });

  it("refuses presignExpiresSec outside 1..604800 in both places", async () => {
    expect(() => downloader({ presignExpiresSec: 604_801 })).toThrow(
      "defineHandler: presignExpiresSec must be an integer from 1 to 604800 (7 days, the SigV4 maximum), got 604801",
    );
    await using h = memoryHarness();
    await expect(workerFor(h, downloader(), { presignExpiresSec: 0 })).rejects.toThrow(/presignExpiresSec/);
  });
});

describe("a job without a store", () => {
  it("says the S3 module's own RUNLET_S3_NOT_CONFIGURED words", async () => {
    await using h = memoryHarness();
    let configured: boolean | undefined;
    await using _w = await workerFor(
      h,
      defineHandler({
        async handler({ s3 }) {
          configured = s3.configured;
          await s3.upload("x");
        },
      }),
    );
    const job = await h.waitForJob(h.enqueue("local", { input: {} }));
    expect(configured).toBe(false);
    const report = JSON.parse(job.error ?? "{}") as { error_message?: string };
    expect(report.error_message).toBe(NO_STORE_MESSAGE);
    const module = createJobS3({
      jobId: "j",
      s3Config: undefined,
      bucket: undefined,
      signal: new AbortController().signal,
      log: (await import("pino")).pino({ enabled: false }),
    });
    await expect(module.upload("x")).rejects.toThrow(NO_STORE_MESSAGE);
    expect(NO_STORE_MESSAGE).toBe(
      "ctx.s3 has no store: send the job with s3Config {accessId, accessSecret, bucketName, endpointUrl}, or set " +
        "BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint",
    );
  });

  // Issue 31: a URL needs no store. The job's input names a URL; the worker has no s3Config and
  // no BUCKET_*, and the download runs with the same guard, cap and temporary folder.
  it("downloads an http(s) URL, under the private-address guard and into a folder removed at the job's end", async () => {
    const { existsSync } = await import("node:fs");
    const reader = defineHandler({
      input: z.object({ url: z.string(), maxBytes: z.number().optional() }),
      async handler({ input, s3 }) {
        const got = await s3.download(
          input.url,
          input.maxBytes === undefined ? {} : { maxBytes: input.maxBytes },
        );
        if (!("path" in got)) throw new Error("expected a file");
        return { configured: s3.configured, text: await readFile(got.path, "utf8"), path: got.path };
      },
    });
    {
      await using h = memoryHarness();
      await using _w = await workerFor(h, reader);
      const refused = await runOne(h, false);
      expect(refused.status).toBe("FAILED");
      expect(errorMessage(refused.error)).toContain("refused: 127.0.0.1 resolves to 127.0.0.1");
    }
    await using h = memoryHarness();
    await using _w = await workerFor(h, reader, { allowPrivateAddresses: true });
    const job = await runOne(h, false);
    expect(job.status, job.error).toBe("COMPLETED");
    const out = job.output as { configured: boolean; text: string; path: string };
    expect(out).toMatchObject({ configured: false, text: "served from loopback" });
    expect(existsSync(out.path)).toBe(false);
    const capped = await h.waitForJob(h.enqueue("local", { input: { url: fileUrl, maxBytes: 5 } }));
    expect(capped.status).toBe("FAILED");
    expect(errorMessage(capped.error)).toContain("is larger than its cap of 5 bytes");
    const byKey = await h.waitForJob(h.enqueue("local", { input: { url: "some/key" } }));
    expect(errorMessage(byKey.error)).toBe(NO_STORE_MESSAGE);
  });

  it("downloads an http(s) URL without a store inside an isolation thread", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, (await import(urlThreadFixture)).default, {
      handlerModule: urlThreadFixture,
      allowPrivateAddresses: true,
    });
    const job = await runOne(h, false);
    expect(job.status, job.error).toBe("COMPLETED");
    expect(job.output).toEqual({ configured: false, text: "served from loopback" });
  }, 30_000);
});
