import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";
import { infer, loadModel } from "../src/model.js";
import { tinyModel, tinyModelWithExternalData, tinyReference } from "../src/tiny-model.js";

// The built-in tiny model (src/tiny-model.ts) on onnxruntime-node's CPU provider: its weights
// are known, so every answer is.
const ROWS = [
  [1, 2, 3, 4],
  [0.5, -1, 2, 0],
];

function close(actual: number[][], expected: number[][]): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((row, i) => {
    row.forEach((v, j) => {
      expect(v).toBeCloseTo(expected[i]?.[j] ?? Number.NaN, 5);
    });
  });
}

describe("onnx", () => {
  it("runs the model on a batch of rows", async () => {
    const model = await loadModel();
    try {
      expect(model.input).toEqual({ name: "x", width: 4 });
      close(await infer(model, ROWS), tinyReference(ROWS));
    } finally {
      await model.release();
    }
  });

  it("loads a model file by its path, its weights in an external data file beside it", async () => {
    // Large models keep their weights apart (and a file over 2 GiB cannot be read into one
    // buffer): ORT must get the path, to find the data file in the model's folder.
    const dir = await mkdtemp(join(tmpdir(), "onnx-model-"));
    try {
      const { model: bytes, data } = tinyModelWithExternalData("tiny.weights");
      await writeFile(join(dir, "tiny.onnx"), bytes);
      await writeFile(join(dir, "tiny.weights"), data);
      const model = await loadModel({ path: join(dir, "tiny.onnx") });
      try {
        close(await infer(model, ROWS), tinyReference(ROWS));
      } finally {
        await model.release();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("names the path when the model file cannot be opened", async () => {
    const dir = await mkdtemp(join(tmpdir(), "onnx-model-"));
    try {
      const missing = join(dir, "missing.onnx");
      await expect(loadModel({ path: missing })).rejects.toThrow(
        `the model file ${missing} (MODEL_PATH) cannot be opened: ENOENT`,
      );
      await expect(loadModel({ path: dir })).rejects.toThrow(
        `the model file ${dir} (MODEL_PATH) cannot be opened`,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("loads hf:org/name/file from a model cache laid out as the platform lays it out", async () => {
    // /runpod-volume/huggingface-cache/hub/models--acme--tiny: refs/main holds the snapshot's
    // commit; the snapshot's files are links into blobs/. RUNLET_HF_CACHE (here: cacheDir) points
    // at such a folder locally.
    const hub = await mkdtemp(join(tmpdir(), "onnx-hub-"));
    const commit = "0123456789abcdef0123456789abcdef01234567";
    try {
      const root = join(hub, "models--acme--tiny");
      await mkdir(join(root, "blobs"), { recursive: true });
      await mkdir(join(root, "refs"), { recursive: true });
      await mkdir(join(root, "snapshots", commit), { recursive: true });
      await writeFile(join(root, "blobs", "b0"), tinyModel());
      await symlink(join("..", "..", "blobs", "b0"), join(root, "snapshots", commit, "model.onnx"));
      await writeFile(join(root, "refs", "main"), commit);
      const model = await loadModel({ path: "hf:acme/tiny/model.onnx", cacheDir: hub });
      try {
        expect(model.source).toBe(`hf:acme/tiny/model.onnx (cached snapshot ${commit})`);
        close(await infer(model, ROWS), tinyReference(ROWS));
      } finally {
        await model.release();
      }
    } finally {
      await rm(hub, { recursive: true, force: true });
    }
  });

  it("answers jobs through a local copy of the platform", async () => {
    await using h = await createHarness({ handler });
    const job = await h.endpoint.runsync({ input: { rows: ROWS } });
    expect(job.status, job.error).toBe("COMPLETED");
    close(job.output?.rows ?? [], tinyReference(ROWS));
    // The wrong width: the job fails with the reason, the worker goes on.
    const bad = await h.endpoint.runsync({ input: { rows: [[1, 2]] } });
    expect(bad.status).toBe("FAILED");
    expect(bad.error).toBe("row 0 has 2 values; the model takes 4");
    const again = await h.endpoint.runsync({ input: { rows: [[0, 0, 0, 0]] } });
    close(again.output?.rows ?? [], [[0.1, 0.2, 0.3]]);
  });
});
