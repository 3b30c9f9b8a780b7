import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromEnv, llmHandler } from "../../examples/llm/handler.js";
import { writeTinyModel } from "../../examples/llm/tiny-model.js";
import type { Harness } from "../../src/harness/index.js";
import { logSink, memoryHarness, testHarness, workerFor } from "../support/workers.js";

// issue 54, item 3: LLM_MODEL=hf:org/name[@revision]/file.gguf in the llm starter. The model
// cache is a folder laid out as the platform lays out /runpod-volume/huggingface-cache/hub
// (refs/main holding the commit, snapshots/<commit>/ whose files link into blobs/), pointed at
// with RUNLET_HF_CACHE; the hub is a loopback server. The model is the tiny random llama the
// starter writes, run by llama.cpp's CPU build (one thread: README, "Threads").

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const TOKEN = "hf_s3cr3tT0ken";

let tmp: string;
let cache: string;
let gguf: Buffer;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-llm-hf-"));
  gguf = await readFile(await writeTinyModel(join(tmp, "tiny.gguf")));
  cache = join(tmp, "hub");
  const root = join(cache, "models--acme--tiny-llama");
  await mkdir(join(root, "blobs"), { recursive: true });
  await mkdir(join(root, "refs"), { recursive: true });
  await mkdir(join(root, "snapshots", COMMIT, "gguf"), { recursive: true });
  await writeFile(join(root, "blobs", "b0"), gguf);
  await symlink(join("..", "..", "..", "blobs", "b0"), join(root, "snapshots", COMMIT, "gguf", "tiny.gguf"));
  await writeFile(join(root, "refs", "main"), `${COMMIT}\n`);
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** The environment of an endpoint serving `model`, small and on one thread. */
function envFor(model: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    LLM_MODEL: model,
    RUNLET_HF_CACHE: cache,
    LLM_PARALLEL: "1",
    LLM_CONTEXT_SIZE: "512",
    LLM_THREADS: "1",
    ...extra,
  };
}

/** A chat job for `model` through the queue, as test_input.json sends one. */
async function chat(h: Harness, model: string) {
  const id = h.enqueue("local", {
    input: {
      openai_route: "/v1/chat/completions",
      openai_input: { model, messages: [{ role: "user", content: "hi" }], max_tokens: 4, temperature: 0 },
    },
  });
  return h.waitForJob(id, { timeoutMs: 60_000 });
}

/** A listening server on loopback, and its address. */
async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("the llm starter's hf: models", () => {
  it("serves hf:org/name/file from the model cache, with nothing downloaded", async () => {
    await using h = memoryHarness();
    const modelDir = join(tmp, "unused-downloads");
    // A hub that cannot answer: a download attempt would fail the setup.
    const config = configFromEnv(
      envFor("hf:acme/tiny-llama/gguf/tiny.gguf", {
        LLM_MODEL_DIR: modelDir,
        HF_ENDPOINT: "http://127.0.0.1:9",
      }),
    );
    expect(config.modelId).toBe("tiny");
    const sink = logSink();
    const w = await workerFor(h, llmHandler(config), { sink });
    try {
      const job = await chat(h, "tiny");
      expect(job.status, job.error).toBe("COMPLETED");
      expect(JSON.stringify(job.output)).toMatch(/"finish_reason":"length"/);
      const loaded = sink.lines.find((l) => l["message"] === "the model runs on the CPU");
      expect(loaded?.["modelPath"]).toBe(
        join(cache, "models--acme--tiny-llama", "snapshots", COMMIT, "gguf", "tiny.gguf"),
      );
      expect(loaded?.["origin"]).toBe(`the model cache's snapshot ${COMMIT}`);
      expect(await readdir(modelDir).catch(() => [])).toEqual([]);
    } finally {
      await w.close();
    }
  }, 120_000);

  it("downloads it from the hub once when the cache lacks it, the token going to the hub only and never to the log", async () => {
    const seen: Array<{ url: string; headers: IncomingHttpHeaders; at: "hub" | "cdn" }> = [];
    // The hub answers with a redirect to another origin, as huggingface.co does (its CDN).
    const cdn = createServer((req, res) => {
      seen.push({ url: req.url ?? "", headers: req.headers, at: "cdn" });
      if (req.url === "/blobs/b0") res.writeHead(200, { "content-length": gguf.length }).end(gguf);
      else res.writeHead(404).end();
    });
    const cdnUrl = await listen(cdn);
    const hub = createServer((req, res) => {
      seen.push({ url: req.url ?? "", headers: req.headers, at: "hub" });
      if (req.headers.authorization !== `Bearer ${TOKEN}`) res.writeHead(401).end();
      else if (req.url === "/acme/fresh/resolve/v1/tiny.gguf")
        res.writeHead(302, { location: `${cdnUrl}/blobs/b0` }).end();
      else res.writeHead(404).end();
    });
    const hubUrl = await listen(hub);
    try {
      const modelDir = join(tmp, "downloads");
      const env = envFor("hf:acme/fresh@v1/tiny.gguf", {
        LLM_MODEL_DIR: modelDir,
        HF_ENDPOINT: hubUrl,
        HF_TOKEN: TOKEN,
      });
      for (const round of [1, 2]) {
        await using h = memoryHarness();
        const sink = logSink();
        const w = await workerFor(h, llmHandler(configFromEnv(env)), { sink });
        try {
          const job = await chat(h, "tiny");
          expect(job.status, job.error).toBe("COMPLETED");
          const loaded = sink.lines.find((l) => l["message"] === "the model runs on the CPU");
          expect(loaded?.["origin"], `round ${round}`).toBe(
            `downloaded from ${hubUrl}/acme/fresh/resolve/v1/tiny.gguf`,
          );
          expect(sink.text()).not.toContain(TOKEN);
          expect(JSON.stringify(h.requests({}))).not.toContain(TOKEN);
        } finally {
          await w.close();
        }
      }
      // Once: the second worker found the first one's file in LLM_MODEL_DIR (the warm cache's folder).
      expect(seen.map((s) => `${s.at} ${s.url}`)).toEqual([
        "hub /acme/fresh/resolve/v1/tiny.gguf",
        "cdn /blobs/b0",
      ]);
      expect(seen[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
      // fetch drops the token when the redirect leaves the hub's origin.
      expect(seen[1]?.headers.authorization).toBeUndefined();
      expect((await readdir(modelDir)).filter((f) => f.endsWith("-tiny.gguf"))).toHaveLength(1);

      // Without the token: the hub's 401, and what to do about it (on loopback: read from the pings).
      await using h = await testHarness();
      const sink = logSink();
      const w = await workerFor(
        h,
        llmHandler(configFromEnv({ ...env, LLM_MODEL: "hf:acme/gated/tiny.gguf", HF_TOKEN: "" })),
        { sink },
      );
      expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
      const reason = h.requests({ route: "ping" }).find((r) => r.query["status"] === "unhealthy")?.query[
        "reason"
      ];
      expect(reason).toBe(
        `setup failed: Error: downloading the model from ${hubUrl}/acme/gated/resolve/main/tiny.gguf failed: HTTP 401: hf:acme/gated/tiny.gguf is not in the model cache, and the hub refused the download (a gated or private model needs HF_TOKEN, of an account granted access)`,
      );
    } finally {
      await new Promise((resolve) => hub.close(resolve));
      await new Promise((resolve) => cdn.close(resolve));
    }
  }, 180_000);

  it("is unfit before its first job when offline and the cache lacks the model, the reason naming both", async () => {
    await using h = await testHarness();
    const config = configFromEnv(
      envFor("hf:acme/absent/model.gguf", { HF_HUB_OFFLINE: "1", HF_ENDPOINT: "http://127.0.0.1:9" }),
    );
    const w = await workerFor(h, llmHandler(config));
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const unhealthy = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(unhealthy.map((r) => [r.query["check"], r.query["reason"]])).toEqual([
      [
        "setup",
        `setup failed: RunletError: HF_HUB_OFFLINE is set, so LLM_MODEL hf:acme/absent/model.gguf is not downloaded, and acme/absent (revision main) is not in the model cache at ${cache}: no models--acme--absent folder; the cache holds acme/tiny-llama. Choose the model in the endpoint's settings (Model) so the platform caches it, or point RUNLET_HF_CACHE at a folder that holds it`,
      ],
    ]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  }, 60_000);

  it("refuses a malformed hf: source at start, with the shape it should have", () => {
    expect(() => configFromEnv({ LLM_MODEL: "hf:acme/model.gguf" })).toThrow(
      /^a model source "hf:\.\.\." is hf:<org>\/<name>\[@<revision>\]\/<file in the repository>/,
    );
  });
});
