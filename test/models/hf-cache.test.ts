import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cachedModelCheck,
  cachedModelEnv,
  defineHandler,
  hfDownloadUrl,
  parseHfSource,
  resolveCachedModel,
} from "../../src/index.js";
import { infer, loadModel } from "../../templates/onnx/src/model.js";
import { tinyModel, tinyReference } from "../../templates/onnx/src/tiny-model.js";
import { memoryHarness, testHarness, workerFor } from "../support/workers.js";

// issue 54, item 3: models the platform caches for an endpoint, under
// /runpod-volume/huggingface-cache/hub in Hugging Face's layout. The tests lay a folder out as the
// platform does (refs/main holding the commit, snapshots/<commit>/ whose files link into blobs/)
// and point runlet at it, as RUNLET_HF_CACHE does under `runlet dev`.

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const OLD = "fedcba9876543210fedcba9876543210fedcba98";

let tmp: string;
let cache: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-hf-cache-"));
  cache = join(tmp, "hub");
  await layOut(cache, "acme/tiny", { "model.onnx": tinyModel(), "onnx/config.json": Buffer.from("{}") });
  await mkdir(join(cache, "models--acme--other", "snapshots"), { recursive: true });
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A model as the platform's cache holds it: blobs, a snapshot of links into them, refs/main, and an older tagged snapshot. */
async function layOut(dir: string, repo: string, files: Record<string, Uint8Array>): Promise<void> {
  const root = join(dir, `models--${repo.replace("/", "--")}`);
  let n = 0;
  for (const [file, bytes] of Object.entries(files)) {
    const blob = join(root, "blobs", `blob${n++}`);
    await mkdir(dirname(blob), { recursive: true });
    await writeFile(blob, bytes);
    const link = join(root, "snapshots", COMMIT, file);
    await mkdir(dirname(link), { recursive: true });
    await symlink(
      join(
        "..",
        "..",
        ...file
          .split("/")
          .slice(1)
          .map(() => ".."),
        "blobs",
        `blob${n - 1}`,
      ),
      link,
    );
  }
  await mkdir(join(root, "refs"), { recursive: true });
  await writeFile(join(root, "refs", "main"), `${COMMIT}\n`);
  await writeFile(join(root, "refs", "v1"), OLD);
  await mkdir(join(root, "snapshots", OLD), { recursive: true });
  // A file whose blob never arrived (a download cut short).
  await symlink(join("..", "..", "blobs", "missing"), join(root, "snapshots", OLD, "model.onnx"));
}

describe("resolveCachedModel", () => {
  it("resolves a model by repository id, revision and file from a folder laid out as the platform lays it out", async () => {
    const snapshot = join(cache, "models--acme--tiny", "snapshots", COMMIT);
    expect(await resolveCachedModel("acme/tiny", { env: { RUNLET_HF_CACHE: cache } })).toEqual({
      repo: "acme/tiny",
      revision: "main",
      commit: COMMIT,
      snapshotDir: snapshot,
      path: snapshot,
    });
    const file = await resolveCachedModel("acme/tiny", { cacheDir: cache, file: "onnx/config.json" });
    expect(file.path).toBe(join(snapshot, "onnx", "config.json"));
    expect((await resolveCachedModel("acme/tiny", { cacheDir: cache, revision: COMMIT })).commit).toBe(
      COMMIT,
    );
  });

  it("fails with what the cache holds: its models, the model's revisions and snapshots, the snapshot's files", async () => {
    await expect(resolveCachedModel("acme/huge", { cacheDir: cache })).rejects.toMatchObject({
      code: "RUNLET_MODEL_NOT_CACHED",
      message: `acme/huge (revision main) is not in the model cache at ${cache}: no models--acme--huge folder; the cache holds acme/other, acme/tiny. Choose the model in the endpoint's settings (Model) so the platform caches it, or point RUNLET_HF_CACHE at a folder that holds it`,
    });
    await expect(resolveCachedModel("acme/tiny", { cacheDir: cache, revision: "v2" })).rejects.toThrow(
      `acme/tiny (revision v2) is not in the model cache at ${cache}: no refs/v2; the model's revisions: main, v1; its snapshots: ${COMMIT}, ${OLD}`,
    );
    await expect(resolveCachedModel("acme/tiny", { cacheDir: cache, file: "model.gguf" })).rejects.toThrow(
      `acme/tiny (revision main) is not in the model cache at ${cache}: snapshot ${COMMIT} has no file model.gguf; its files: model.onnx, onnx/config.json`,
    );
    // The link is there, its blob is not.
    await expect(
      resolveCachedModel("acme/tiny", { cacheDir: cache, revision: "v1", file: "model.onnx" }),
    ).rejects.toThrow(`snapshot ${OLD} has no file model.onnx; its files: model.onnx`);
    await expect(resolveCachedModel("acme/tiny", { cacheDir: join(tmp, "nowhere") })).rejects.toThrow(
      "no models--acme--tiny folder; the cache holds nothing.",
    );
  });

  it("refuses names that could leave the cache", async () => {
    await expect(resolveCachedModel("../etc", { cacheDir: cache })).rejects.toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
    });
    await expect(
      resolveCachedModel("acme/tiny", { cacheDir: cache, file: "../../refs/main" }),
    ).rejects.toThrow("a cached model's file must be a path inside the repository");
    await expect(
      resolveCachedModel("acme/tiny", { cacheDir: cache, revision: "../x" }),
    ).rejects.toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
    });
  });

  it("gives sidecars the offline environment that points Hugging Face's libraries at the cache", () => {
    expect(cachedModelEnv({ env: { RUNLET_HF_CACHE: cache } })).toEqual({
      HF_HUB_CACHE: cache,
      HF_HUB_OFFLINE: "1",
      TRANSFORMERS_OFFLINE: "1",
      HF_DATASETS_OFFLINE: "1",
      HF_HUB_DISABLE_TELEMETRY: "1",
    });
    expect(cachedModelEnv({ env: {} })["HF_HUB_CACHE"]).toBe("/runpod-volume/huggingface-cache/hub");
  });

  it("parses hf: sources and makes their download URL", () => {
    expect(parseHfSource("hf:acme/tiny@v1/onnx/model.onnx")).toEqual({
      repo: "acme/tiny",
      revision: "v1",
      file: "onnx/model.onnx",
    });
    expect(hfDownloadUrl(parseHfSource("hf:acme/tiny/model.onnx"))).toBe(
      "https://huggingface.co/acme/tiny/resolve/main/model.onnx",
    );
    expect(() => parseHfSource("hf:acme/model.onnx")).toThrow(
      "hf:<org>/<name>[@<revision>]/<file in the repository>",
    );
    expect(() => parseHfSource("hf:acme/tiny/../x")).toThrow("hf:<org>/<name>");
  });
});

describe("a worker that needs a cached model", () => {
  it("is unfit before its first job when the cache lacks its model, the reason listing what was found", async () => {
    await using h = await testHarness();
    const w = await workerFor(
      h,
      defineHandler({
        healthCheck: cachedModelCheck({ repo: "acme/huge", file: "model.onnx", cacheDir: cache }),
        handler: () => "never",
      }),
      { podId: "pod-no-model" },
    );
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const pings = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(pings.map((p) => [p.query["check"], p.query["reason"]])).toEqual([
      [
        "model",
        `acme/huge (revision main) is not in the model cache at ${cache}: no models--acme--huge folder; the cache holds acme/other, acme/tiny. Choose the model in the endpoint's settings (Model) so the platform caches it, or point RUNLET_HF_CACHE at a folder that holds it`,
      ],
    ]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  });

  it("takes jobs when the cache holds it", async () => {
    await using h = memoryHarness();
    const w = await workerFor(
      h,
      defineHandler({
        healthCheck: cachedModelCheck([{ repo: "acme/tiny", file: "model.onnx", cacheDir: cache }]),
        handler: () => "served",
      }),
    );
    const job = await h.waitForJob(h.enqueue("local", { input: {} }), { timeoutMs: 10_000 });
    expect(job.output).toBe("served");
    await w.close();
  });
});

describe("the onnx starter's hf: sources", () => {
  const ROWS = [[1, 2, 3, 4]];

  it("loads hf:org/name/file from the model cache", async () => {
    const model = await loadModel({ path: "hf:acme/tiny/model.onnx", cacheDir: cache });
    try {
      expect(model.source).toBe(`hf:acme/tiny/model.onnx (cached snapshot ${COMMIT})`);
      expect((await infer(model, ROWS))[0]?.[0]).toBeCloseTo(tinyReference(ROWS)[0]?.[0] ?? Number.NaN, 5);
    } finally {
      await model.release();
    }
  });

  it("downloads it from the hub once when the cache lacks it (following the hub's redirect)", async () => {
    const requests: string[] = [];
    const hub = createServer((req, res) => {
      requests.push(req.url ?? "");
      if (req.url === "/acme/fresh/resolve/main/model.onnx") {
        res.writeHead(302, { location: "/blobs/abc" }).end();
      } else if (req.url === "/blobs/abc") {
        res.writeHead(200, { "content-type": "application/octet-stream" }).end(tinyModel());
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => hub.listen(0, "127.0.0.1", resolve));
    try {
      const hubUrl = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;
      const downloadDir = join(tmp, "downloads");
      const options = { path: "hf:acme/fresh/model.onnx", cacheDir: cache, downloadDir, hubUrl };
      const model = await loadModel(options);
      await model.release();
      expect(model.source).toBe(
        `hf:acme/fresh/model.onnx (downloaded from ${hubUrl}/acme/fresh/resolve/main/model.onnx)`,
      );
      const again = await loadModel(options);
      await again.release();
      expect(again.source).toBe("hf:acme/fresh/model.onnx (downloaded before)");
      expect(requests).toEqual(["/acme/fresh/resolve/main/model.onnx", "/blobs/abc"]);
      await expect(loadModel({ ...options, path: "hf:acme/gone/model.onnx" })).rejects.toThrow(
        `the model hf:acme/gone/model.onnx is not in the model cache and its download from ${hubUrl}/acme/gone/resolve/main/model.onnx answered 404`,
      );
    } finally {
      await new Promise((resolve) => hub.close(resolve));
    }
  });

  it("says what happened when the hub cannot be reached, and bounds a download's size", async () => {
    // A port nothing listens on: the connection is refused.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const downloadDir = join(tmp, "bounded");
    const refused = loadModel({
      path: "hf:acme/far/model.onnx",
      cacheDir: cache,
      downloadDir,
      hubUrl: `http://127.0.0.1:${closedPort}`,
    });
    await expect(refused).rejects.toThrow(
      `the model hf:acme/far/model.onnx is not in the model cache and its download from http://127.0.0.1:${closedPort}/acme/far/resolve/main/model.onnx failed: connect ECONNREFUSED`,
    );

    const model = tinyModel();
    const hub = createServer((req, res) => {
      if (req.url === "/acme/sized/resolve/main/model.onnx") {
        res.writeHead(200, { "content-length": model.length }).end(model);
      } else if (req.url === "/acme/chunked/resolve/main/model.onnx") {
        // No length given: the bytes are counted as they come.
        res.writeHead(200);
        res.write(model.subarray(0, 8));
        res.end(model.subarray(8));
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => hub.listen(0, "127.0.0.1", resolve));
    try {
      const hubUrl = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;
      const options = { cacheDir: cache, downloadDir, hubUrl, maxBytes: 10 };
      await expect(loadModel({ ...options, path: "hf:acme/sized/model.onnx" })).rejects.toThrow(
        `the model hf:acme/sized/model.onnx is ${model.length} bytes, over the limit of 10 bytes (MODEL_MAX_BYTES)`,
      );
      await expect(loadModel({ ...options, path: "hf:acme/chunked/model.onnx" })).rejects.toThrow(
        "the model hf:acme/chunked/model.onnx is over the limit of 10 bytes (MODEL_MAX_BYTES)",
      );
      // Nothing half-written stays behind.
      const left = await readdir(downloadDir, { recursive: true }).catch(() => []);
      expect(left.filter((f) => String(f).endsWith(".partial"))).toEqual([]);
      const whole = await loadModel({
        ...options,
        maxBytes: model.length,
        path: "hf:acme/chunked/model.onnx",
      });
      await whole.release();
    } finally {
      await new Promise((resolve) => hub.close(resolve));
    }
  });
});
