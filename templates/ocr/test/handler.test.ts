import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";
import { loadOcr, recognise } from "../src/ocr.js";
import { textPicture } from "./picture.js";

// The real model (PaddleOCR on onnxruntime-node's CPU provider) on pictures rendered here.
const LINES = ["Hello runlet", "The quick brown fox", "Invoice 4521 paid"];

describe("ocr", () => {
  it("reads the lines of a rendered picture, in order", async () => {
    const model = await loadOcr();
    try {
      const lines = await recognise(model, await textPicture(LINES));
      expect(lines.map((l) => l.text)).toEqual(LINES);
      for (const line of lines) expect(line.score).toBeGreaterThan(0.8);
    } finally {
      await model.release();
    }
  }, 60_000);

  it("answers a job through a local copy of the platform", async () => {
    await using h = await createHarness({ handler });
    const image = (await textPicture(LINES)).toString("base64");
    const job = await h.endpoint.runsync({ input: { image } });
    expect(job.status, job.error).toBe("COMPLETED");
    expect(job.output?.lines.map((l) => l.text)).toEqual(LINES);
    // Not a picture: the job fails with the reason, the worker goes on.
    const bad = await h.endpoint.runsync({ input: { image: Buffer.from("hello").toString("base64") } });
    expect(bad.status).toBe("FAILED");
    expect(bad.error).toMatch(/^the picture could not be decoded/);
  }, 120_000);

  it("reads a picture from a URL, with no S3 store", async () => {
    const picture = await textPicture(LINES);
    const server = createServer((_req, res) => res.end(picture));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      // Downloads refuse private and loopback addresses; a test serving the picture on
      // 127.0.0.1 allows them for its own worker.
      await using h = await createHarness({ handler, worker: { allowPrivateAddresses: true } });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/picture.png`;
      const job = await h.endpoint.runsync({ input: { url } });
      expect(job.status, job.error).toBe("COMPLETED");
      expect(job.output?.lines.map((l) => l.text)).toEqual(LINES);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }, 120_000);
});
