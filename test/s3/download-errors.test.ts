import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, workerFor } from "../support/workers.js";

// Issue 54, item 4: a refused or failed URL download is the caller's fault (a bad URL, a server
// that says no): the job fails with a plain error that starts with its code, no traceback report,
// so a client need not wrap ctx.s3.download to say what went wrong. A real server on loopback.

let server: Server;
let base: string;
let closedUrl: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/missing") {
      res.statusCode = 404;
      res.end("no");
    } else if (req.url === "/hang") {
      res.writeHead(200, { "content-length": "100" });
      res.write("x");
    } else res.end("0123456789");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // A port with nothing listening: connection refused.
  const spare = createServer().listen(0, "127.0.0.1");
  await once(spare, "listening");
  closedUrl = `http://127.0.0.1:${(spare.address() as AddressInfo).port}/gone`;
  spare.close();
});
afterAll(() => {
  server?.closeAllConnections();
  server?.close();
});

const input = z.object({
  url: z.string(),
  maxBytes: z.number().optional(),
  timeoutMs: z.number().optional(),
});

async function failWith(allowPrivateAddresses: boolean, job: z.infer<typeof input>): Promise<string> {
  await using h = memoryHarness();
  await using _w = await workerFor(
    h,
    defineHandler({
      allowPrivateAddresses,
      input,
      async handler({ input: { url, maxBytes, timeoutMs }, s3 }) {
        await s3.download(url, {
          ...(maxBytes === undefined ? {} : { maxBytes }),
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
        });
        return "downloaded";
      },
    }),
  );
  const done = await h.waitForJob(h.enqueue("local", { input: job }), { timeoutMs: 20_000 });
  expect(done.status).toBe("FAILED");
  return done.error ?? "";
}

describe("a failed URL download reaches the client as a plain job error with its code (issue 54, item 4)", () => {
  it("a private address: RUNLET_S3_DOWNLOAD_REFUSED, naming RUNLET_ALLOW_PRIVATE_ADDRESSES=1", async () => {
    const error = await failWith(false, { url: `${base}/file` });
    expect(error).toBe(
      `RUNLET_S3_DOWNLOAD_REFUSED: download of ${base}/file refused: 127.0.0.1 resolves to 127.0.0.1, a private, loopback or link-local address; use a public URL, or, where this is intended (tests against a server on this machine or network), start the worker with RUNLET_ALLOW_PRIVATE_ADDRESSES=1 in its environment (runlet dev, an image) or allowPrivateAddresses: true in code`,
    );
  });

  it.each([
    ["/missing", {}, `RUNLET_URL_DOWNLOAD_HTTP: download of BASE/missing was answered HTTP 404 (not found)`],
    ["/file", { maxBytes: 4 }, "RUNLET_S3_DOWNLOAD_TOO_LARGE: "],
    [
      "/hang",
      { timeoutMs: 300 },
      "RUNLET_S3_DOWNLOAD_TIMEOUT: download of BASE/hang did not finish within its timeout of 300 ms",
    ],
  ] as const)("%s %j: its code first, no traceback", async (path, options, start) => {
    const error = await failWith(true, { url: `${base}${path}`, ...options });
    expect(error.startsWith(start.replace("BASE", base)), error).toBe(true);
    expect(error).not.toContain("error_traceback");
  });

  it("a connection refused: RUNLET_URL_DOWNLOAD_FAILED, no traceback", async () => {
    const error = await failWith(true, { url: closedUrl });
    expect(
      error.startsWith(`RUNLET_URL_DOWNLOAD_FAILED: download of ${closedUrl} failed before an answer`),
      error,
    ).toBe(true);
    expect(error).not.toContain("error_traceback");
  });
});
