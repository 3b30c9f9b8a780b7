import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it, type MockInstance, vi } from "vitest";
import handler from "../../examples/ocr/handler.js";
import { BadImageError, loadOcr, type OcrModel, recognise } from "../../examples/ocr/ocr.js";
import { textPicture } from "../../examples/ocr/picture.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { createHarness, type TestHarness } from "../../src/testing/index.js";

// The real PaddleOCR models on onnxruntime-node's CPU provider, on pictures rendered here.
const LINES = ["Hello runlet", "The quick brown fox", "Invoice 4521 paid"];

describe("examples/ocr: the model", () => {
  let model: OcrModel;
  let picture: Buffer;
  beforeAll(async () => {
    [model, picture] = await Promise.all([loadOcr({ device: "auto" }), textPicture(LINES)]);
  }, 60_000);
  afterAll(async () => {
    await model?.release();
  });

  it("reads each line of a rendered picture, in order, with its box and score", async () => {
    expect(model.device).toBe("cpu"); // no GPU here; deviceReason says why
    expect(model.deviceReason).not.toBe("");
    const lines = await recognise(model, picture);
    expect(lines.map((l) => l.text)).toEqual(LINES);
    for (const [i, line] of lines.entries()) {
      expect(line.score).toBeGreaterThan(0.8);
      const [[x0, y0], , [x1, y1]] = line.box;
      expect(x0).toBeGreaterThanOrEqual(0);
      expect(x1).toBeGreaterThan(x0 + 100);
      // Each box sits below the one before it.
      if (i > 0) expect(y0).toBeGreaterThan(lines[i - 1]!.box[2][1] - 5);
      expect(y1).toBeGreaterThan(y0);
    }
  }, 60_000);

  it("reads the same whatever the recogniser's batch size", async () => {
    const one = await recognise(model, picture, { batchSize: 1 });
    const all = await recognise(model, picture, { batchSize: 16 });
    expect(one.map((l) => l.text)).toEqual(LINES);
    expect(all.map((l) => l.text)).toEqual(LINES);
    expect(all.map((l) => l.box)).toEqual(one.map((l) => l.box));
  }, 60_000);

  it("finds no line on a blank picture, and refuses what is not a picture or too large", async () => {
    const blank = await textPicture([""]);
    expect(await recognise(model, blank)).toEqual([]);
    await expect(recognise(model, Buffer.from("not a picture"))).rejects.toThrow(BadImageError);
    await expect(recognise(model, picture, { maxPixels: 1000 })).rejects.toThrow(
      "the picture has more than 1000 pixels (maxPixels)",
    );
  }, 60_000);
});

describe("examples/ocr: the handler", () => {
  // One worker, so one model load, for the handler's tests; it allows loopback (the documented way
  // to let a test's worker fetch from 127.0.0.1, docs/s3.md) for the picture server below. That
  // ctx.s3.download refuses a loopback URL otherwise is test/s3/url-download.test.ts's subject.
  let h: TestHarness<typeof handler>;
  let picture: Buffer;
  let base: string;
  const served: string[] = [];
  const server = createServer((req, res) => {
    served.push(req.url ?? "");
    if (req.url === "/big.png") {
      res.writeHead(200, { "content-type": "image/png", "content-length": String(17 * 1_048_576) });
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "image/png", "content-length": String(picture.length) });
    res.end(picture);
  });
  // Counts the ONNX sessions the worker's teardown releases (a spy that lets release run). ORT types
  // InferenceSession as a factory; at run time it is a class whose sessions share this prototype.
  const sessions = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;
  let release: MockInstance<ort.InferenceSession["release"]>;
  beforeAll(async () => {
    picture = await textPicture(LINES);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    release = vi.spyOn(sessions, "release");
    h = await createHarness({ handler, worker: { allowPrivateAddresses: true } });
  }, 120_000);
  afterAll(async () => {
    release?.mockRestore();
    await h?.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("loads the model in setup, before the worker's first take", () => {
    const startup = h.harness.workerStartup("local", "local-worker-1");
    expect(startup?.state).toBe("ready");
    expect(Object.keys(startup?.phases ?? {})).toContain("setup");
    expect(release).not.toHaveBeenCalled();
  });

  it("answers a base64 picture with its lines, and fails bad input with a reason", async () => {
    const job = await h.endpoint.runsync(
      { input: { image: picture.toString("base64") } },
      { waitMs: 120_000 },
    );
    expect(job.status, job.error).toBe("COMPLETED");
    expect(job.output?.lines.map((l) => l.text)).toEqual(LINES);
    expect(job.output?.device).toBe("cpu");
    const dataUrl = await h.endpoint.runsync({
      input: { image: `data:image/png;base64,${picture.toString("base64")}`, batchSize: 1 },
    });
    expect(dataUrl.output?.lines.map((l) => l.text)).toEqual(LINES);

    const notPicture = await h.endpoint.runsync({
      input: { image: Buffer.from("hello").toString("base64") },
    });
    expect(notPicture.status).toBe("FAILED");
    expect(notPicture.error).toMatch(/^the picture could not be decoded/);
    const both = await h.endpoint.runsync({ input: { image: "aGk=", url: "https://example.com/a.png" } });
    expect(both.status).toBe("FAILED");
    expect(both.error).toContain("give exactly one of image (base64) and url");
  }, 120_000);

  it("reads a picture from a URL with no S3 store", async () => {
    const job = await h.endpoint.runsync({ input: { url: `${base}/picture.png` } }, { waitMs: 120_000 });
    expect(job.status, job.error).toBe("COMPLETED");
    expect(job.output?.lines.map((l) => l.text)).toEqual(LINES);
    expect(served).toEqual(["/picture.png"]);
    // Over 16 MiB announced: refused before a byte of the body is read.
    const big = await h.endpoint.runsync({ input: { url: `${base}/big.png` } });
    expect(big.status).toBe("FAILED");
    expect(big.error).toContain("is larger than its cap of 16777216 bytes");
  }, 120_000);

  it("releases its two ONNX sessions in teardown, when the worker closes", async () => {
    expect(release).not.toHaveBeenCalled();
    await h.close();
    expect(release).toHaveBeenCalledTimes(2); // the detector and the recogniser
  }, 120_000);
});

describe("examples/ocr: a worker that expects a GPU", () => {
  it("makes a worker told to expect a GPU unfit when it runs on the CPU: its setup fails (check=setup)", async () => {
    await using h = await createHarness({
      endpoints: [{ id: "local", workers: 0, handler: defineHandler({ handler: () => 1 }) }],
    });
    process.env["OCR_EXPECT_GPU"] = "1";
    try {
      const w = await startWorker(handler, { env: h.harness.workerEnv("local") });
      expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    } finally {
      delete process.env["OCR_EXPECT_GPU"];
    }
    const unhealthy = h.harness.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    // The model loads in setup, and only loading tells whether CUDA works (a failed CUDA session
    // falls back to the CPU), so the check is setup's: its thrown message is the ping's reason.
    expect(unhealthy.map((r) => r.query["check"])).toEqual(["setup"]);
    expect(unhealthy[0]?.query["reason"]).toMatch(
      /^setup failed: Error: OCR_EXPECT_GPU is set but OCR runs on the CPU: no NVIDIA device/,
    );
    expect(h.harness.requests({ route: "job-take" })).toEqual([]);
  }, 120_000);
});
