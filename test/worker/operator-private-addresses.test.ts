import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { ALLOW_PRIVATE_ADDRESSES_ENV, PRIVATE_ADDRESSES_WARNING } from "../../src/s3/private-address.js";
import { startWorker } from "../../src/worker/index.js";
import { logSink, memoryHarness } from "../support/workers.js";

// The operator's switch RUNLET_ALLOW_PRIVATE_ADDRESSES (issue 45): set on the worker's
// environment, it lets ctx.s3.download reach a file server on loopback, over the handler's own
// allowPrivateAddresses: false, and the worker warns at start. A real HTTP server on 127.0.0.1.

let files: Server;
let fileUrl: string;
beforeAll(async () => {
  files = createServer((_req, res) => res.end("served from loopback"));
  files.listen(0, "127.0.0.1");
  await once(files, "listening");
  fileUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}/file.txt`;
});
afterAll(() => {
  files?.close();
});

const handler = defineHandler({
  allowPrivateAddresses: false,
  input: z.object({ url: z.string() }),
  async handler({ input, s3 }) {
    const got = (await s3.download(input.url)) as { path: string };
    return { text: await readFile(got.path, "utf8") };
  },
});

async function run(h: Harness, value: string | undefined) {
  const sink = logSink();
  await using _w = await startWorker(handler, {
    env: {
      ...h.workerEnv("local"),
      RUNPOD_ENDPOINT_ID: "local",
      ...(value === undefined ? {} : { [ALLOW_PRIVATE_ADDRESSES_ENV]: value }),
    },
    logDestination: sink.stream,
    // The platform's routes in memory: the subject is the download's guard, which uses sockets.
    connect: () => h.connect(),
    shutdownGraceMs: 2_000,
    flushTimeoutMs: 2_000,
  });
  const job = await h.waitForJob(h.enqueue("local", { input: { url: fileUrl } }), { timeoutMs: 20_000 });
  const warned = sink.lines.filter(
    (l) => l["level"] === "WARN" && l["message"] === PRIVATE_ADDRESSES_WARNING,
  );
  return { job, warned: warned.length };
}

describe(`${ALLOW_PRIVATE_ADDRESSES_ENV}`, () => {
  it("=1 lets downloads reach loopback over the handler's setting, and the worker warns once at start", async () => {
    await using h = memoryHarness();
    const { job, warned } = await run(h, "1");
    expect(job.status, job.error).toBe("COMPLETED");
    expect(job.output).toEqual({ text: "served from loopback" });
    expect(warned).toBe(1);
  });

  it("unset or 0 leaves the refusal in place, with no warning", async () => {
    for (const value of [undefined, "0"]) {
      await using h = memoryHarness();
      const { job, warned } = await run(h, value);
      expect(job.status).toBe("FAILED");
      expect(job.error).toContain("refused: 127.0.0.1 resolves to 127.0.0.1");
      expect(warned).toBe(0);
    }
  });

  it("refuses any other value at start, naming it", async () => {
    await using h = memoryHarness();
    await expect(run(h, "yes please")).rejects.toThrow(
      `${ALLOW_PRIVATE_ADDRESSES_ENV} must be 1, true, 0 or false, got "yes please"`,
    );
  });
});
