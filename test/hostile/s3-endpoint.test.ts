import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/handler/index.js";
import type { Harness } from "../../src/harness/index.js";
import { isPrivateAddress } from "../../src/s3/index.js";
import { useS3rver } from "../support/use-s3rver.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

// Issue 32, item 1: the job's own s3Config.endpointUrl is chosen by whoever sends the job, so it is
// held to the rule of ctx.s3.download URLs (no private, loopback or link-local host, by literal or
// by name), for a key download, an upload and the automatic offload of a large output. The
// operator's BUCKET_ENDPOINT_URL stays trusted; allowPrivateAddresses lets local stores through.

/** A loopback server standing in for a cloud metadata service: it answers anything with "credentials". */
let metadata: { url: string; hits: number; close: () => void };
const s3rver = useS3rver("jobs");

beforeAll(async () => {
  const state = { hits: 0 };
  const server = createServer((req, res) => {
    req.resume();
    state.hits += 1;
    res.writeHead(200, { "content-type": "application/json", etag: '"e"' });
    res.end('{"AccessKeyId":"ASIA-STOLEN","SecretAccessKey":"stolen"}');
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  metadata = {
    url: `http://127.0.0.1:${port}`,
    get hits() {
      return state.hits;
    },
    close: () => server.close(),
  };
});
afterAll(async () => {
  metadata?.close();
});

const s3Job = defineHandler({
  input: z.object({ op: z.enum(["download", "upload", "offload"]) }),
  async handler({ input, s3 }) {
    if (input.op === "download") {
      const got = await s3.download("latest/meta-data/iam", { to: "stream" });
      const parts: Buffer[] = [];
      for await (const part of (got as { stream: AsyncIterable<Buffer> }).stream) parts.push(part);
      return { text: Buffer.concat(parts).toString() };
    }
    if (input.op === "upload") return { ref: await s3.upload("hello") };
    return { big: "x".repeat(4_000) };
  },
});

function config(endpointUrl: string) {
  return { accessId: "S3RVER", accessSecret: "S3RVER", bucketName: "jobs", endpointUrl };
}

async function ended(h: Harness, id: string) {
  return waitFor(
    "the job to end",
    () => {
      const job = h.job(id);
      return job?.status === "COMPLETED" || job?.status === "FAILED" ? job : undefined;
    },
    20_000,
  );
}

describe("a job's s3Config endpoint is untrusted (issue 32)", () => {
  it("refuses a key download, an upload and an offload to a loopback endpoint, by literal and by name", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, s3Job, { maxResultBytes: 1_000 });
    const port = new URL(metadata.url).port;
    for (const endpointUrl of [
      metadata.url,
      `http://localhost:${port}`,
      `http://[::ffff:127.0.0.1]:${port}`,
    ]) {
      for (const op of ["download", "upload", "offload"] as const) {
        const id = h.enqueue("local", { input: { op }, s3Config: config(endpointUrl) });
        const job = await ended(h, id);
        expect({ endpointUrl, op, status: job.status }).toEqual({ endpointUrl, op, status: "FAILED" });
        expect(String(job.error)).toContain("s3Config.endpointUrl");
        expect(String(job.error)).toContain("private");
      }
    }
    expect(metadata.hits).toBe(0);
  });

  it("lets a loopback s3Config through with allowPrivateAddresses, and trusts the operator's BUCKET_ENDPOINT_URL", async () => {
    await using h = memoryHarness();
    {
      await using _w = await workerFor(h, s3Job, { allowPrivateAddresses: true });
      const id = h.enqueue("local", { input: { op: "upload" }, s3Config: config(s3rver.endpoint) });
      expect((await ended(h, id)).status).toBe("COMPLETED");
    }
    {
      await using _w = await workerFor(h, s3Job, {
        env: {
          ...h.workerEnv("local"),
          RUNPOD_ENDPOINT_ID: "local",
          BUCKET_ENDPOINT_URL: `${s3rver.endpoint}/jobs`,
          BUCKET_ACCESS_KEY_ID: "S3RVER",
          BUCKET_SECRET_ACCESS_KEY: "S3RVER",
        },
      });
      const id = h.enqueue("local", { input: { op: "upload" } });
      expect((await ended(h, id)).status).toBe("COMPLETED");
    }
  });

  it("judges NAT64 addresses (64:ff9b::/96) by the IPv4 address they reach", () => {
    expect(isPrivateAddress("64:ff9b::7f00:1")).toBe(true); // 127.0.0.1
    expect(isPrivateAddress("64:ff9b::127.0.0.1")).toBe(true);
    expect(isPrivateAddress("64:ff9b:0:0:0:0:a9fe:a9fe")).toBe(true); // 169.254.169.254
    expect(isPrivateAddress("64:ff9b::a00:1")).toBe(true); // 10.0.0.1
    expect(isPrivateAddress("64:ff9b:1::1")).toBe(true); // local-use NAT64
    expect(isPrivateAddress("64:ff9b::808:808")).toBe(false); // 8.8.8.8, as DNS64 gives it
    expect(isPrivateAddress("2606:4700::1111")).toBe(false);
  });
});
