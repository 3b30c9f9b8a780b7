import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { decodeBmp, encodeBmp, greyscale, testCard } from "../../examples/s3-file/bmp.js";
import handler from "../../examples/s3-file/handler.js";
import { startWorker } from "../../src/index.js";
import { inMemoryHarness } from "../support/inject.js";
import { useS3rver } from "../support/use-s3rver.js";

const BUCKET = "runlet-example";
const s3rver = useS3rver(BUCKET);

interface Ref {
  bucket: string;
  key: string;
  url: string;
  bytes: number;
}

describe("BMP helpers", () => {
  it("round-trips a picture whose rows need padding", () => {
    const card = testCard(5, 3); // 15-byte rows padded to 16
    const file = encodeBmp(card);
    expect(file.length).toBe(54 + 16 * 3);
    expect(decodeBmp(file)).toEqual(card);
  });

  it("greys by luma: pure red becomes 76, pure green 150, pure blue 29", () => {
    const grey = greyscale({ width: 3, height: 1, rgb: new Uint8Array([255, 0, 0, 0, 255, 0, 0, 0, 255]) });
    expect([...grey.rgb]).toEqual([76, 76, 76, 150, 150, 150, 29, 29, 29]);
  });

  it("refuses what it cannot read", () => {
    expect(() => decodeBmp(Buffer.from("GIF89a"))).toThrow("not a BMP file (no BM header)");
  });
});

describe("examples/s3-file", () => {
  it("renders a test card, greys it, and returns both through S3; then greys an uploaded source by key", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 300 });
    await using _worker = await startWorker(handler, {
      env: h.workerEnv("local"),
      connect: () => h.connect(),
      logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
      takeTimeoutMs: 300,
      // The jobs' s3Config names s3rver on loopback, which a job may name only with this opt-in.
      allowPrivateAddresses: true,
    });
    const s3Config = {
      accessId: "S3RVER",
      accessSecret: "S3RVER",
      bucketName: BUCKET,
      endpointUrl: s3rver.endpoint,
    };

    const first = h.enqueue("local", { input: { width: 33, height: 7 }, s3Config });
    const done = await h.waitForJob(first);
    expect(done.status).toBe("COMPLETED");
    const out = done.output as { original: Ref; grey: Ref };
    expect(out.original.key).toBe(`${first}/colour.bmp`);
    expect(out.grey.key).toBe(`${first}/grey.bmp`);
    const colour = Buffer.from(await (await fetch(out.original.url)).arrayBuffer());
    expect(colour.equals(encodeBmp(testCard(33, 7)))).toBe(true);
    const greyRes = await fetch(out.grey.url);
    expect(greyRes.headers.get("content-type")).toBe("image/bmp");
    const grey = decodeBmp(Buffer.from(await greyRes.arrayBuffer()));
    expect(grey).toEqual(greyscale(testCard(33, 7)));

    const second = h.enqueue("local", { input: { source: out.original.key }, s3Config });
    const again = await h.waitForJob(second);
    expect(again.status).toBe("COMPLETED");
    const regrey = (again.output as { grey: Ref }).grey;
    const bytes = Buffer.from(await (await fetch(regrey.url)).arrayBuffer());
    expect(decodeBmp(bytes)).toEqual(grey);
  });

  it("refuses a source URL on a loopback address (the worker does not allow private addresses)", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 300 });
    await using _worker = await startWorker(handler, {
      env: h.workerEnv("local"),
      connect: () => h.connect(),
      logDestination: new Writable({ write: (_c, _e, cb) => cb() }),
      takeTimeoutMs: 300,
    });
    const s3Config = {
      accessId: "S3RVER",
      accessSecret: "S3RVER",
      bucketName: BUCKET,
      endpointUrl: s3rver.endpoint,
    };
    const source = `${s3rver.endpoint}/${BUCKET}/anything.bmp`;
    const id = h.enqueue("local", { input: { source }, s3Config });
    const job = await h.waitForJob(id);
    expect(job.status).toBe("FAILED");
    // The caller's fault: a plain error with its code, no traceback report (issue 54, item 4).
    expect(job.error).toBe(
      `RUNLET_S3_DOWNLOAD_REFUSED: download of ${source} refused: 127.0.0.1 resolves to 127.0.0.1, a private, loopback or link-local ` +
        "address; use a public URL, or, where this is intended (tests against a server on this machine or network), start the worker with RUNLET_ALLOW_PRIVATE_ADDRESSES=1 in its environment (runlet dev, an image) or allowPrivateAddresses: true in code",
    );
  });
});
