import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { defineHandler, startWorker } from "runlet";
import { createHarness } from "runlet/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromEnv, type LlmConfig, llmHandler } from "../src/handler.js";
import { writeTinyModel } from "../src/tiny-model.js";

// A real GGUF model through llama.cpp: the tiny random llama src/tiny-model.ts writes (two
// layers, a byte-level vocabulary; nothing downloaded). Its text is noise, printable ASCII, but
// every token is llama.cpp's. One thread keeps it fast on a busy machine (README, "Threads").
let dir: string;
let config: LlmConfig;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "llm-test-"));
  const model = await writeTinyModel(join(dir, "tiny.gguf"));
  config = { ...configFromEnv({}), model, modelId: "tiny", parallel: 2, contextSize: 512, threads: 1 };
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The official `openai` client pointed at the local platform's /openai/v1 routes. */
const openai = (h: { url: string; apiKey: string }) =>
  new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });

const messages = [{ role: "user" as const, content: "tell me a story" }];

describe("handler", () => {
  it("streams a chat completion token by token, stopping at max_tokens with the model's usage", async () => {
    await using h = await createHarness({ handler: llmHandler(config) });
    const stream = await openai(h).chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const text = chunk.choices[0]?.delta.content;
      if (text) deltas.push(text);
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(deltas.length).toBeGreaterThan(5); // streamed, not one block
    expect(deltas.join("")).toMatch(/^[\x20-\x7e]{12}$/);
    expect(finish).toBe("length");
    expect(usage?.completion_tokens).toBe(12);
    expect(usage?.prompt_tokens).toBeGreaterThan(0);
  }, 60_000);

  it("serves two completions at once from one context, and honours stop", async () => {
    await using h = await createHarness({ handler: llmHandler(config) });
    const client = openai(h);
    const request = { model: "tiny", messages, max_tokens: 20, temperature: 0 };
    const [a, b] = await Promise.all([
      client.chat.completions.create(request),
      client.chat.completions.create(request),
    ]);
    const text = a.choices[0]?.message.content ?? "";
    expect(text).toHaveLength(20);
    expect(b.choices[0]?.message.content).toBe(text); // greedy: the same answer, each its own
    const stop = text.slice(8, 10);
    const cut = await client.chat.completions.create({ ...request, stop: [stop] });
    expect(cut.choices[0]?.message.content).toBe(text.slice(0, text.indexOf(stop)));
    expect(cut.choices[0]?.finish_reason).toBe("stop");
  }, 60_000);

  it("calls a tool, takes its result back, and answers JSON that follows a schema", async () => {
    await using h = await createHarness({ handler: llmHandler({ ...config, contextSize: 2048 }) });
    const client = openai(h);
    const weather = {
      type: "function" as const,
      function: {
        name: "get_weather",
        parameters: {
          type: "object",
          properties: { city: { enum: ["Paris", "Oslo"] } },
          required: ["city"],
          additionalProperties: false,
        },
      },
    };
    // The tiny model would never choose a tool itself: tool_choice makes the answer a call.
    const called = await client.chat.completions.create({
      model: "tiny",
      messages,
      tools: [weather],
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    expect(called.choices[0]?.finish_reason).toBe("tool_calls");
    const call = called.choices[0]?.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(["Paris", "Oslo"]).toContain(JSON.parse(call.function.arguments).city);
    const answered = await client.chat.completions.create({
      model: "tiny",
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
      tools: [weather],
      max_tokens: 8,
    });
    expect(answered.choices[0]?.message.content).toHaveLength(8);

    const shaped = await client.chat.completions.create({
      model: "tiny",
      messages,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "mood",
          schema: {
            type: "object",
            properties: { happy: { type: "boolean" } },
            required: ["happy"],
            additionalProperties: false,
          },
        },
      },
    });
    expect(typeof JSON.parse(shaped.choices[0]?.message.content ?? "").happy).toBe("boolean");
  }, 60_000);
});

describe("hf: models", () => {
  // LLM_MODEL=hf:org/name/file.gguf: the platform's model cache first (RUNLET_HF_CACHE points at a
  // folder laid out as /runpod-volume/huggingface-cache/hub is: refs/main holds the snapshot's
  // commit, the snapshot's files link into blobs/), else one download from the hub (HF_ENDPOINT).
  const commit = "0123456789abcdef0123456789abcdef01234567";
  let cache: string;
  let gguf: Buffer;
  beforeAll(async () => {
    gguf = await readFile(join(dir, "tiny.gguf"));
    cache = join(dir, "hub");
    const root = join(cache, "models--acme--tiny-llama");
    await mkdir(join(root, "blobs"), { recursive: true });
    await mkdir(join(root, "refs"), { recursive: true });
    await mkdir(join(root, "snapshots", commit), { recursive: true });
    await writeFile(join(root, "blobs", "b0"), gguf);
    await symlink(join("..", "..", "blobs", "b0"), join(root, "snapshots", commit, "tiny.gguf"));
    await writeFile(join(root, "refs", "main"), commit);
  });
  const envOf = (model: string, extra: Record<string, string> = {}) => ({
    LLM_MODEL: model,
    RUNLET_HF_CACHE: cache,
    LLM_PARALLEL: "1",
    LLM_CONTEXT_SIZE: "512",
    LLM_THREADS: "1",
    ...extra,
  });
  const ask = (h: { url: string; apiKey: string }) =>
    openai(h).chat.completions.create({ model: "tiny", messages, max_tokens: 4, temperature: 0 });

  it("loads the model from the model cache, downloading nothing", async () => {
    const modelDir = join(dir, "not-downloaded");
    // No hub answers there: a download would fail the setup.
    const env = envOf("hf:acme/tiny-llama/tiny.gguf", {
      LLM_MODEL_DIR: modelDir,
      HF_ENDPOINT: "http://127.0.0.1:9",
    });
    await using h = await createHarness({ handler: llmHandler(configFromEnv(env)) });
    expect((await ask(h)).choices[0]?.message.content).toHaveLength(4);
    expect(await readdir(modelDir).catch(() => [])).toEqual([]);
  }, 60_000);

  it("downloads it from the hub once when the cache lacks it, with HF_TOKEN", async () => {
    const asked: string[] = [];
    const hub = createServer((req, res) => {
      asked.push(`${req.url} ${req.headers.authorization}`);
      if (req.url === "/acme/other/resolve/main/tiny.gguf") res.writeHead(302, { location: "/blob" }).end();
      else if (req.url === "/blob") res.writeHead(200).end(gguf);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => hub.listen(0, "127.0.0.1", resolve));
    try {
      const env = envOf("hf:acme/other/tiny.gguf", {
        LLM_MODEL_DIR: join(dir, "downloads"),
        HF_ENDPOINT: `http://127.0.0.1:${(hub.address() as AddressInfo).port}`,
        HF_TOKEN: "hf_test",
      });
      for (let start = 0; start < 2; start++) {
        await using h = await createHarness({ handler: llmHandler(configFromEnv(env)) });
        expect((await ask(h)).choices[0]?.message.content).toHaveLength(4);
      }
      // The second start found the first one's download.
      expect(asked).toEqual(["/acme/other/resolve/main/tiny.gguf Bearer hf_test", "/blob Bearer hf_test"]);
    } finally {
      await new Promise((resolve) => hub.close(resolve));
    }
  }, 60_000);

  it("fails setup when offline (HF_HUB_OFFLINE=1) and the cache lacks the model, saying so", async () => {
    await using h = await createHarness({
      endpoints: [{ id: "local", workers: 0, handler: defineHandler({ handler: () => 1 }) }],
    });
    const env = envOf("hf:acme/absent/model.gguf", { HF_HUB_OFFLINE: "1" });
    const w = await startWorker(llmHandler(configFromEnv(env)), { env: h.harness.workerEnv("local") });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const reason = h.harness.requests({ route: "ping" }).find((r) => r.query["status"] === "unhealthy")
      ?.query["reason"];
    expect(reason).toMatch(
      /^setup failed: RunletError: HF_HUB_OFFLINE is set, so LLM_MODEL hf:acme\/absent\/model.gguf is not downloaded, and acme\/absent \(revision main\) is not in the model cache at .*: no models--acme--absent folder; the cache holds acme\/tiny-llama\./,
    );
  }, 60_000);
});
