import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromEnv, type LlmConfig, llmHandler } from "../../examples/llm/handler.js";
import { fetchModel, type GenerationEnd, type Llm, loadLlm } from "../../examples/llm/llm.js";
import { tinyLlamaGguf, writeTinyModel } from "../../examples/llm/tiny-model.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";

// A real GGUF model through llama.cpp's CPU build: the tiny random llama the example writes
// (two layers, byte-level vocabulary). Its text is noise, but it is llama.cpp's, token by token.
// One thread: llama.cpp's threads spin while they wait for each other, and on a machine whose
// cores are busy with other work two threads made a 24-token answer take seconds instead of ms.

let dir: string;
let modelPath: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "runlet-llm-"));
  modelPath = await writeTinyModel(join(dir, "tiny.gguf"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every item of a generation, and what it returned. */
async function collect<T>(
  gen: AsyncGenerator<T, GenerationEnd>,
): Promise<{ items: T[]; end: GenerationEnd }> {
  const items: T[] = [];
  for (;;) {
    const step = await gen.next();
    if (step.done === true) return { items, end: step.value };
    items.push(step.value);
  }
}

const hi = [{ role: "user" as const, content: "hello there" }];

describe("examples/llm: the model", () => {
  let llm: Llm;
  beforeAll(async () => {
    llm = await loadLlm({ modelPath, parallel: 2, contextSize: 512, threads: 1 });
  }, 60_000);
  afterAll(async () => {
    await llm?.release();
  });

  it("runs on the CPU here and says why, with the chat template of the file", () => {
    expect(llm.device).toBe("cpu");
    expect(llm.deviceReason).toMatch(/^the CUDA build does not load here: /);
    expect(llm.chatTemplate).toBe("ChatML");
    expect(llm.contextSize).toBeGreaterThanOrEqual(512);
  });

  it("streams max_tokens tokens of printable text, greedy runs alike, with the tokenizer's counts", async () => {
    const signal = new AbortController().signal;
    const a = await collect(llm.chat(hi, { maxTokens: 24, temperature: 0, signal }));
    const b = await collect(llm.chat(hi, { maxTokens: 24, temperature: 0, signal }));
    expect(a.items.length).toBe(24); // one byte-level token per item
    expect(a.items.join("")).toMatch(/^[\x20-\x7e]{24}$/);
    expect(b.items).toEqual(a.items);
    expect(a.end.finishReason).toBe("length");
    expect(a.end.completionTokens).toBe(24);
    // ChatML around "hello there": <|im_start|>, "user\n", 11 characters, <|im_end|>, "\n", the
    // assistant's header; the exact count is the template's, so only its order is checked.
    expect(a.end.promptTokens).toBeGreaterThan(20);
    expect(a.end.promptTokens).toBeLessThan(40);
  }, 60_000);

  it("stops before a stop text, which is not part of the answer", async () => {
    const signal = new AbortController().signal;
    const full = (await collect(llm.chat(hi, { maxTokens: 24, temperature: 0, signal }))).items.join("");
    const stop = full.slice(10, 13);
    const cut = await collect(llm.chat(hi, { maxTokens: 24, temperature: 0, stop: [stop], signal }));
    expect(cut.items.join("")).toBe(full.slice(0, full.indexOf(stop)));
    expect(cut.end.finishReason).toBe("stop");
  }, 60_000);

  it("samples with temperature: one seed repeats, another differs", async () => {
    const signal = new AbortController().signal;
    const run = async (seed: number) =>
      (await collect(llm.chat(hi, { maxTokens: 32, temperature: 1, seed, signal }))).items.join("");
    const [a, b, c] = [await run(7), await run(7), await run(8)];
    expect(b).toBe(a);
    expect(c).not.toBe(a);
  }, 60_000);

  it("runs more generations than sequences: the extra one waits for a free sequence, all finish", async () => {
    const signal = new AbortController().signal;
    const alone = (await collect(llm.complete("abc", { maxTokens: 16, temperature: 0, signal }))).items.join(
      "",
    );
    const runs = await Promise.all(
      [0, 1, 2].map(() => collect(llm.complete("abc", { maxTokens: 16, temperature: 0, signal }))),
    );
    for (const r of runs) {
      expect(r.end.finishReason).toBe("length");
      expect(r.items.join("")).toBe(alone);
    }
  }, 60_000);

  it("stops at the signal, keeps what was generated, and frees the sequence", async () => {
    const stop = new AbortController();
    const gen = llm.chat(hi, { maxTokens: 400, temperature: 0, signal: stop.signal });
    const first = await gen.next();
    expect(first.done).toBe(false);
    stop.abort();
    const rest = await collect(gen);
    expect(rest.end.finishReason).toBe("stop");
    expect(rest.end.completionTokens).toBeLessThan(400);
    // Both sequences are free again: two generations run at once without waiting.
    const signal = new AbortController().signal;
    const both = await Promise.all(
      [0, 1].map(() => collect(llm.chat(hi, { maxTokens: 4, temperature: 0, signal }))),
    );
    expect(both.map((r) => r.items.length)).toEqual([4, 4]);
  }, 60_000);

  it("refuses a file that is not GGUF, naming it", async () => {
    const bad = join(dir, "not-a-model.gguf");
    await writeTinyModel(bad);
    await import("node:fs/promises").then((fs) => fs.writeFile(bad, "hello"));
    await expect(loadLlm({ modelPath: bad })).rejects.toThrow(`${bad} is not a GGUF file`);
    await expect(loadLlm({ modelPath: join(dir, "missing.gguf") })).rejects.toThrow(
      /cannot be opened \(ENOENT\)/,
    );
  });
});

describe("examples/llm: fetching the model from a URL", () => {
  it("downloads once into the folder, finds it there the next time, refuses a 404 and a non-GGUF body", async () => {
    const gguf = tinyLlamaGguf();
    const served: string[] = [];
    const server = createServer((req, res) => {
      served.push(req.url ?? "");
      if (req.url === "/m/tiny.gguf") res.end(gguf);
      else if (req.url === "/m/page.gguf") res.end("<html>not a model</html>");
      else if (req.url === "/m/chunked.gguf") {
        // No content-length: the body comes in 40 writes (chunked).
        const step = Math.ceil(gguf.length / 40);
        for (let at = 0; at < gguf.length; at += step) res.write(gguf.subarray(at, at + step));
        res.end();
      } else res.writeHead(404).end("no such file");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const models = join(dir, "fetched");
    try {
      const percents: (number | undefined)[] = [];
      const path = await fetchModel(`${base}/m/tiny.gguf`, {
        dir: models,
        onProgress: (p) => percents.push(p),
      });
      expect(path.endsWith("-tiny.gguf")).toBe(true);
      expect((await readFile(path)).equals(gguf)).toBe(true);
      expect(percents.at(-1)).toBe(100);
      expect(await fetchModel(`${base}/m/tiny.gguf`, { dir: models })).toBe(path);
      expect(served).toEqual(["/m/tiny.gguf"]);
      // Without a size, progress comes every 64 MiB, not once per chunk (each is a log line in setup).
      const reports: (number | undefined)[] = [];
      await fetchModel(`${base}/m/chunked.gguf`, {
        dir: join(dir, "chunked"),
        onProgress: (p) => reports.push(p),
      });
      expect(reports).toEqual([undefined]);
      await expect(fetchModel(`${base}/m/gone.gguf`, { dir: models })).rejects.toThrow(
        `downloading the model from ${base}/m/gone.gguf failed: HTTP 404`,
      );
      // A signed URL's query is a secret: the error (a failed setup's logged reason) leaves it out.
      const signed = fetchModel(`${base}/m/gone.gguf?X-Amz-Signature=s3cr3t`, { dir: models });
      await expect(signed).rejects.toThrow(
        `downloading the model from ${base}/m/gone.gguf?… failed: HTTP 404`,
      );
      await expect(signed).rejects.not.toThrow(/s3cr3t/);
      await expect(fetchModel(`${base}/m/page.gguf`, { dir: models })).rejects.toThrow(/is not a GGUF file/);
      await expect(
        fetchModel(`${base}/m/tiny.gguf`, { dir: join(dir, "small"), maxBytes: 1000 }),
      ).rejects.toThrow(`is ${gguf.length} bytes, over the limit of 1000 (LLM_MODEL_MAX_BYTES)`);
      // Nothing half-written is left to pass for a model.
      expect((await readdir(models)).sort()).toEqual([path.slice(models.length + 1)]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("examples/llm: its settings", () => {
  it("takes the tiny model by default, in the image too, and refuses bad numbers naming the variable", () => {
    expect(configFromEnv({})).toMatchObject({
      model: "tiny",
      modelId: "tiny-llama",
      parallel: 4,
      contextSize: 4096,
    });
    // runlet build's verify step runs the bundle with NODE_ENV=production and no model of its own.
    expect(configFromEnv({ NODE_ENV: "production" }).model).toBe("tiny");
    expect(configFromEnv({ LLM_MODEL: "/runpod-volume/models/qwen2.5-0.5b-q8_0.gguf" }).modelId).toBe(
      "qwen2.5-0.5b-q8_0",
    );
    expect(configFromEnv({ LLM_MODEL: "https://example.com/a/b.gguf?download=1" }).modelId).toBe("b");
    // A signed URL's query is neither the model's id nor listed by /v1/models.
    expect(
      configFromEnv({ LLM_MODEL: "https://bucket.example.com/m/q.gguf?X-Amz-Signature=abc123" }).modelId,
    ).toBe("q");
    expect(
      configFromEnv({ LLM_MODEL: "https://example.com/a/b.gguf?download=1", LLM_MODEL_ID: "b2" }).modelId,
    ).toBe("b2");
    // LLM_MODEL forgotten on an endpoint that named its model: the noise is not served under that name.
    expect(configFromEnv({ LLM_MODEL_ID: "qwen2.5-7b" }).modelId).toBe("tiny-llama");
    expect(() => configFromEnv({ LLM_PARALLEL: "0" })).toThrow(
      'LLM_PARALLEL must be an integer from 1 to 64, got "0"',
    );
  });
});

/** The official `openai` client, unmodified, pointed at the harness's OpenAI routes. */
function openai(h: { url: string; apiKey: string }): OpenAI {
  return new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
}

describe("examples/llm: the handler, through the official openai client", () => {
  let config: LlmConfig;
  beforeAll(() => {
    config = {
      ...configFromEnv({}),
      model: modelPath,
      modelId: "tiny",
      parallel: 2,
      contextSize: 512,
      threads: 1,
    };
  });

  it("streams a chat completion token by token, with finish_reason length and the model's usage", async () => {
    await using h = await createHarness({ handler: llmHandler(config) });
    const client = openai(h);
    const request = { model: "tiny", messages: hi, max_tokens: 16, temperature: 0 };
    const stream = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const deltas = chunks.map((c) => c.choices[0]?.delta.content ?? "").filter((t) => t !== "");
    // 16 tokens, one delta each, the last two included: runlet reads the handler's finish_reason
    // and usage at max_tokens, so nothing is held back for them.
    expect(deltas.length).toBe(16);
    const text = deltas.join("");
    expect(text).toMatch(/^[\x20-\x7e]{16}$/);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("length");
    const usage = chunks.at(-1)?.usage;
    expect(usage?.completion_tokens).toBe(16);
    expect(usage?.prompt_tokens).toBeGreaterThan(20);

    // Not streamed: the same text (greedy), the same usage.
    const whole = await client.chat.completions.create(request);
    expect(whole.choices[0]?.message.content).toBe(text);
    expect(whole.choices[0]?.finish_reason).toBe("length");
    expect(whole.usage).toEqual(usage);

    // A stop text ends it early, with finish_reason stop; completions are served too.
    const stopped = await client.chat.completions.create({ ...request, stop: [text.slice(6, 9)] });
    expect(stopped.choices[0]?.message.content).toBe(text.slice(0, text.indexOf(text.slice(6, 9))));
    expect(stopped.choices[0]?.finish_reason).toBe("stop");
    const completion = await client.completions.create({
      model: "tiny",
      prompt: "abc",
      max_tokens: 5,
      temperature: 0,
    });
    expect(completion.choices[0]?.text).toMatch(/^[\x20-\x7e]{5}$/);
    expect(completion.usage?.completion_tokens).toBe(5);

    // What the model cannot serve is a 400 naming the field.
    await expect(
      client.chat.completions.create({
        model: "tiny",
        messages: [
          { role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/a.png" } }] },
        ],
      }),
    ).rejects.toMatchObject({ status: 400, param: "messages[0].content" });
  }, 120_000);

  it("streams two completions at once from one context (two sequences), each in its own order", async () => {
    await using h = await createHarness({ handler: llmHandler(config) });
    const client = openai(h);
    const request = { model: "tiny", messages: hi, max_tokens: 64, temperature: 0, stream: true as const };
    const [a, b] = await Promise.all([
      client.chat.completions.create(request),
      client.chat.completions.create(request),
    ]);
    const ia = a[Symbol.asyncIterator]();
    const ib = b[Symbol.asyncIterator]();
    // Both have started before either ended: two jobs on the worker at once.
    const heads = await Promise.all([ia.next(), ib.next(), ia.next(), ib.next()]);
    expect(heads.every((s) => s.done === false)).toBe(true);
    const rest = async (it: AsyncIterator<OpenAI.ChatCompletionChunk>, first: string) => {
      let text = first;
      let finish: string | null | undefined;
      for (let s = await it.next(); s.done !== true; s = await it.next()) {
        text += s.value.choices[0]?.delta.content ?? "";
        finish = s.value.choices[0]?.finish_reason ?? finish;
      }
      return { text, finish };
    };
    const firstText = (s: IteratorResult<OpenAI.ChatCompletionChunk>) =>
      s.done === true ? "" : (s.value.choices[0]?.delta.content ?? "");
    const [ra, rb] = await Promise.all([
      rest(ia, firstText(heads[0]!) + firstText(heads[2]!)),
      rest(ib, firstText(heads[1]!) + firstText(heads[3]!)),
    ]);
    expect(ra.finish).toBe("length");
    expect(rb.text).toBe(ra.text); // greedy on the same prompt: the batch does not mix the sequences
    expect(ra.text.length).toBe(64);
  }, 120_000);

  it("stops generating when the client hangs up, and the sequence serves the next request", async () => {
    await using h = await createHarness({ handler: llmHandler({ ...config, parallel: 1 }) });
    const client = openai(h);
    const stop = new AbortController();
    const { data: stream, response } = await client.chat.completions
      .create(
        { model: "tiny", messages: hi, max_tokens: 450, temperature: 0, stream: true },
        { signal: stop.signal },
      )
      .withResponse();
    const id = response.headers.get("x-request-id") ?? "";
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    await it.next();
    stop.abort();
    // The client's stream ends (the SDK ends it quietly on its own abort).
    await it.next().catch(() => undefined);
    // The job was cancelled (its worker got a job-stop), and the one sequence is free again.
    await expect.poll(() => h.harness.job(id)?.status).toBe("CANCELLED");
    const next = await client.chat.completions.create({
      model: "tiny",
      messages: hi,
      max_tokens: 3,
      temperature: 0,
    });
    expect(next.choices[0]?.message.content).toHaveLength(3);
  }, 120_000);

  it("makes a worker told to expect a GPU unfit when llama.cpp's CUDA build does not load (check=setup)", async () => {
    await using h = await createHarness({
      endpoints: [{ id: "local", workers: 0, handler: defineHandler({ handler: () => 1 }) }],
    });
    const w = await startWorker(llmHandler({ ...config, expectGpu: true }), {
      env: h.harness.workerEnv("local"),
    });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const unhealthy = h.harness.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(unhealthy.map((r) => r.query["check"])).toEqual(["setup"]);
    expect(unhealthy[0]?.query["reason"]).toMatch(
      /^setup failed: Error: LLM_EXPECT_GPU is set but llama.cpp's CUDA build does not load: /,
    );
    expect(h.harness.requests({ route: "job-take" })).toEqual([]);
  }, 120_000);

  it("fails setup when LLM_MODEL names a file that is not there, naming it (check=setup)", async () => {
    await using h = await createHarness({
      endpoints: [{ id: "local", workers: 0, handler: defineHandler({ handler: () => 1 }) }],
    });
    const missing = join(dir, "nowhere", "model.gguf");
    const w = await startWorker(llmHandler({ ...config, model: missing }), {
      env: h.harness.workerEnv("local"),
    });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const reason = h.harness.requests({ route: "ping" }).find((r) => r.query["status"] === "unhealthy")
      ?.query["reason"];
    expect(reason).toBe(`setup failed: Error: the model file ${missing} cannot be opened (ENOENT)`);
  }, 60_000);
});
