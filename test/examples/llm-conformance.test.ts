import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromEnv, type LlmConfig, llmHandler } from "../../examples/llm/handler.js";
import { fetchModel, type GenerationEnd, loadLlm } from "../../examples/llm/llm.js";
import { tinyLlamaGguf, writeTinyModel } from "../../examples/llm/tiny-model.js";
import { scanLocal } from "../../src/cache/local-files.js";
import { createHarness } from "../../src/testing/index.js";

// The LLM starter as OpenAI-client users drive it (issues 51 and 53): the tiny random llama the
// example writes, on llama.cpp's CPU build, served by a real in-process worker behind the
// harness's OpenAI route, called through the official `openai` client. Its text is noise; what
// is checked is what the endpoint does with a request: bounds, refusals, tools, grammars, seeds.

let dir: string;
let modelPath: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "runlet-llm-conf-"));
  modelPath = await writeTinyModel(join(dir, "tiny.gguf"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const hi = [{ role: "user" as const, content: "hello there" }];

/** The official client, unmodified: no retries (a retried job would hide what the first one did). */
function openai(h: { url: string; apiKey: string }): OpenAI {
  return new OpenAI({
    apiKey: h.apiKey,
    baseURL: `${h.url}/v2/local/openai/v1`,
    maxRetries: 0,
    timeout: 120_000,
  });
}

/** The worker's settings: two sequences of 512 tokens (or `contextSize`), one thread. */
function tinyConfig(contextSize = 512): LlmConfig {
  return {
    ...configFromEnv({}),
    model: modelPath,
    modelId: "tiny",
    parallel: 2,
    contextSize,
    threads: 1,
  };
}

/** The error a call rejects with (the SDK's APIError: status, code, param, message). */
async function refusal(
  call: Promise<unknown>,
): Promise<{ status: number; code: unknown; param: unknown; message: string }> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the request was answered, not refused").toBeInstanceOf(OpenAI.APIError);
  const e = err as InstanceType<typeof OpenAI.APIError>;
  return { status: e.status ?? 0, code: e.code, param: e.param, message: e.message };
}

/**
 * Streams chat completions back to back while `hostile` runs, and gives the longest time between
 * two chunks (or a chunk and the next stream's first): how long the worker's main thread stood
 * still for everyone else. The monitor's first chunk has come before `hostile` starts.
 */
async function whileStreaming<T>(
  client: OpenAI,
  hostile: () => Promise<T>,
): Promise<{ outcome: PromiseSettledResult<T>; longestGapMs: number; chunks: number }> {
  let done = false;
  let chunks = 0;
  let last = 0;
  let longest = 0;
  let started: () => void = () => undefined;
  const firstChunk = new Promise<void>((resolve) => {
    started = resolve;
  });
  const monitor = (async () => {
    while (!done) {
      const stream = await client.chat.completions.create({
        model: "tiny",
        messages: hi,
        max_tokens: 200,
        temperature: 0,
        stream: true,
      });
      for await (const _chunk of stream) {
        const now = performance.now();
        if (chunks > 0) longest = Math.max(longest, now - last);
        last = now;
        chunks++;
        if (chunks === 3) started();
      }
    }
  })();
  await firstChunk;
  const seenBefore = chunks;
  const [outcome] = await Promise.allSettled([hostile()]);
  // One more chunk after the answer: a stall that ended with it is counted too.
  const after = chunks;
  while (chunks === after) await new Promise((resolve) => setTimeout(resolve, 5));
  done = true;
  await monitor;
  expect(chunks).toBeGreaterThan(seenBefore);
  return { outcome: outcome as PromiseSettledResult<T>, longestGapMs: longest, chunks };
}

/**
 * The longest a concurrent stream may stand still while a hostile request is refused. Generous:
 * the machine is shared, and a stream's chunks come 20 ms apart at best. What it rules out is
 * the seconds-long freeze (and the heap exhaustion) of issue 51.
 */
const STALL_BOUND_MS = 2_000;

describe("examples/llm: hostile requests are refused before they cost the other requests (issue 51)", () => {
  it("refuses a stop text over the bound (400, param stop, the bound named); megabytes of them stall no stream", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    const long = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: hi,
        max_tokens: 4,
        stop: ["x".repeat(1025)],
      }),
    );
    expect(long).toMatchObject({ status: 400, param: "stop" });
    expect(long.message).toMatch(/at most 1024 characters, stop\[0\] holds 1025/);
    const one = await refusal(
      client.chat.completions.create({ model: "tiny", messages: hi, max_tokens: 4, stop: "y".repeat(5000) }),
    );
    expect(one).toMatchObject({ status: 400, param: "stop" });
    const five = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: hi,
        max_tokens: 4,
        stop: ["a", "b", "c", "d", "e"],
      }),
    );
    expect(five).toMatchObject({ status: 400, param: "stop" });
    expect(five.message).toMatch(/at most 4 stop sequences/);
    // At the bound: served.
    const ok = await client.chat.completions.create({
      model: "tiny",
      messages: hi,
      max_tokens: 4,
      stop: ["z".repeat(1024)],
    });
    expect(ok.choices[0]?.finish_reason).toBe("length");

    // 4 stop texts of 2.5 M characters (10 MB): refused, while another stream goes on.
    const { outcome, longestGapMs } = await whileStreaming(client, () =>
      client.chat.completions.create({
        model: "tiny",
        messages: hi,
        max_tokens: 4,
        stop: [0, 1, 2, 3].map((i) => String(i).repeat(2_500_000)),
      }),
    );
    expect(outcome.status).toBe("rejected");
    expect((outcome as PromiseRejectedResult).reason).toMatchObject({ status: 400, param: "stop" });
    expect(longestGapMs).toBeLessThan(STALL_BOUND_MS);
    // And the worker lives: the next request is answered.
    const next = await client.chat.completions.create({ model: "tiny", messages: hi, max_tokens: 3 });
    expect(next.choices[0]?.message.content).toHaveLength(3);
  }, 180_000);

  it("ends an answer without max_tokens at what the context has left (finish_reason length), and caps a huge one", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    // The tiny model never ends an answer itself: only the bound does.
    const free = await client.chat.completions.create({ model: "tiny", messages: hi, temperature: 0 });
    expect(free.choices[0]?.finish_reason).toBe("length");
    const usage = free.usage as OpenAI.CompletionUsage;
    // One token of the 512 stays free, as node-llama-cpp keeps it.
    expect(usage.prompt_tokens + usage.completion_tokens).toBe(511);
    expect(free.choices[0]?.message.content?.length).toBe(usage.completion_tokens);

    const huge = await client.chat.completions.create({
      model: "tiny",
      messages: hi,
      temperature: 0,
      max_tokens: 1_000_000,
      stream: true,
      stream_options: { include_usage: true },
    });
    let finish: string | null | undefined;
    let streamed: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of huge) {
      finish = chunk.choices[0]?.finish_reason ?? finish;
      streamed = chunk.usage ?? streamed;
    }
    expect(finish).toBe("length");
    expect(streamed).toEqual(usage);

    const completion = await client.completions.create({ model: "tiny", prompt: "abc", temperature: 0 });
    expect(completion.choices[0]?.finish_reason).toBe("length");
    expect((completion.usage?.prompt_tokens ?? 0) + (completion.usage?.completion_tokens ?? 0)).toBe(511);
  }, 180_000);

  it("refuses a prompt over the context (400 context_length_exceeded) and counts the prompt's tokens right", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    // Byte-level vocabulary: a character is at least a token.
    const fits = await client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "q".repeat(400) }],
      max_tokens: 2,
    });
    expect(fits.usage?.prompt_tokens).toBeGreaterThan(400);
    expect(fits.usage?.prompt_tokens).toBeLessThan(440);

    const over = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "q".repeat(600) }],
        max_tokens: 2,
      }),
    );
    expect(over).toMatchObject({ status: 400, code: "context_length_exceeded", param: "messages" });
    expect(over.message).toMatch(/context holds 512 tokens; the messages take \d+/);
    // Far over: refused on its characters, without rendering or tokenizing it.
    const far = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "q".repeat(100_000) }],
      }),
    );
    expect(far).toMatchObject({ status: 400, code: "context_length_exceeded", param: "messages" });
    // Tools' descriptions count: they are rendered into the prompt.
    const described = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: hi,
        tools: [{ type: "function", function: { name: "f", description: "d".repeat(10_000) } }],
      }),
    );
    expect(described).toMatchObject({ status: 400, code: "context_length_exceeded", param: "messages" });
    expect(described.message).toMatch(/the messages and tools hold \d+ characters/);
    const prompt = await refusal(client.completions.create({ model: "tiny", prompt: "p".repeat(600) }));
    expect(prompt).toMatchObject({ status: 400, code: "context_length_exceeded", param: "prompt" });

    // Too many messages: refused before the template renders them, the bound named.
    const many = await refusal(
      client.chat.completions.create({
        model: "tiny",
        messages: Array.from({ length: 2049 }, () => ({ role: "user" as const, content: "hi" })),
      }),
    );
    expect(many).toMatchObject({ status: 400, param: "messages" });
    expect(many.message).toMatch(/2048/);

    // 40 000 messages, while another stream goes on.
    const { outcome, longestGapMs } = await whileStreaming(client, () =>
      client.chat.completions.create({
        model: "tiny",
        messages: Array.from({ length: 40_000 }, (_, i) => ({
          role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
          content: `message ${i}`,
        })),
        max_tokens: 2,
      }),
    );
    expect((outcome as PromiseRejectedResult).reason).toMatchObject({ status: 400, param: "messages" });
    expect(longestGapMs).toBeLessThan(STALL_BOUND_MS);
    // As many messages as are taken, all short: over the context, refused, and the stream goes on.
    const { outcome: most, longestGapMs: mostGap } = await whileStreaming(client, () =>
      client.chat.completions.create({
        model: "tiny",
        messages: Array.from({ length: 2048 }, () => ({ role: "user" as const, content: "hi" })),
        max_tokens: 2,
      }),
    );
    expect((most as PromiseRejectedResult).reason).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "messages",
    });
    expect(mostGap).toBeLessThan(STALL_BOUND_MS);
    const next = await client.chat.completions.create({ model: "tiny", messages: hi, max_tokens: 3 });
    expect(next.choices[0]?.message.content).toHaveLength(3);
  }, 180_000);
});

describe("examples/llm: what OpenAI clients ask for (issues 51.10, 53)", () => {
  it("gives each request without a seed a fresh one: concurrent and back-to-back answers differ; a seed still repeats", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    const ask = (seed?: number) =>
      client.chat.completions
        .create({
          model: "tiny",
          messages: hi,
          max_tokens: 24,
          temperature: 1,
          ...(seed === undefined ? {} : { seed }),
        })
        .then((r) => r.choices[0]?.message.content ?? "");
    const together = await Promise.all([ask(), ask(), ask(), ask()]);
    expect(new Set(together).size).toBe(4);
    const [a, b] = [await ask(), await ask()];
    expect(b).not.toBe(a);
    expect(await ask(42)).toBe(await ask(42));
  }, 120_000);

  it("refuses what it does not serve, naming the parameter", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    const chat = { model: "tiny", messages: hi, max_tokens: 4 };
    expect(await refusal(client.chat.completions.create({ ...chat, logprobs: true }))).toMatchObject({
      status: 400,
      param: "logprobs",
    });
    expect(await refusal(client.chat.completions.create({ ...chat, top_logprobs: 3 }))).toMatchObject({
      status: 400,
      param: "top_logprobs",
    });
    expect(await refusal(client.chat.completions.create({ ...chat, n: 2 }))).toMatchObject({
      status: 400,
      param: "n",
    });
    expect(await refusal(client.chat.completions.create({ ...chat, logit_bias: { "5": 10 } }))).toMatchObject(
      {
        status: 400,
        param: "logit_bias",
      },
    );
    expect(
      await refusal(
        client.chat.completions.create({
          ...chat,
          functions: [{ name: "f", parameters: { type: "object", properties: {} } }],
        }),
      ),
    ).toMatchObject({ status: 400, param: "functions" });
    expect(await refusal(client.chat.completions.create({ ...chat, function_call: "auto" }))).toMatchObject({
      status: 400,
      param: "function_call",
    });
    const completion = { model: "tiny", prompt: "abc", max_tokens: 4 };
    expect(await refusal(client.completions.create({ ...completion, logprobs: 2 }))).toMatchObject({
      status: 400,
      param: "logprobs",
    });
    expect(await refusal(client.completions.create({ ...completion, echo: true }))).toMatchObject({
      status: 400,
      param: "echo",
    });
    expect(await refusal(client.completions.create({ ...completion, suffix: "end" }))).toMatchObject({
      status: 400,
      param: "suffix",
    });
    // tool_choice without tools, or naming a function not given; a response_format it does not know.
    expect(await refusal(client.chat.completions.create({ ...chat, tool_choice: "required" }))).toMatchObject(
      {
        status: 400,
        param: "tool_choice",
      },
    );
    expect(
      await refusal(
        client.chat.completions.create({
          ...chat,
          tools: [{ type: "function", function: { name: "a" } }],
          tool_choice: { type: "function", function: { name: "b" } },
        }),
      ),
    ).toMatchObject({ status: 400, param: "tool_choice" });
    expect(
      await refusal(
        client.chat.completions.create({
          ...chat,
          response_format: { type: "yaml" } as unknown as { type: "text" },
        }),
      ),
    ).toMatchObject({ status: 400, param: "response_format.type" });
    // A schema its grammar cannot follow: refused, naming where it is.
    expect(
      await refusal(
        client.chat.completions.create({
          ...chat,
          response_format: {
            type: "json_schema",
            json_schema: {
              name: "x",
              schema: { type: "object", properties: { a: { enum: [{ no: "objects" }] } } },
            },
          },
        }),
      ),
    ).toMatchObject({ status: 400, param: "response_format.json_schema.schema" });
    // null for the optional fields is taken, as OpenAI and vLLM take it.
    const nulls = await client.chat.completions.create({
      ...chat,
      tools: null,
      tool_choice: null,
      response_format: null,
      parallel_tool_calls: null,
    } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(nulls.choices[0]?.message.content).toHaveLength(4);
  }, 120_000);

  const weather = {
    type: "function" as const,
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: { city: { enum: ["Paris", "Oslo", "Lima"] }, days: { enum: [1, 2, 3] } },
        required: ["city", "days"],
        additionalProperties: false,
      },
    },
  };
  const time = {
    type: "function" as const,
    function: {
      name: "get_time",
      parameters: {
        type: "object",
        properties: { zone: { enum: ["UTC", "CET"] } },
        required: ["zone"],
        additionalProperties: false,
      },
    },
  };

  it("round-trips a tool call: streamed as OpenAI streams it, answered whole, its result taken back", async () => {
    // The tools' descriptions take room in the prompt: a larger context than the other tests'.
    await using h = await createHarness({ handler: llmHandler(tinyConfig(2048)) });
    const client = openai(h);
    const ask = [{ role: "user" as const, content: "What is the weather in Paris?" }];
    const forced = { type: "function" as const, function: { name: "get_weather" } };
    const stream = await client.chat.completions.create({
      model: "tiny",
      messages: ask,
      tools: [weather, time],
      tool_choice: forced,
      temperature: 0,
      stream: true,
    });
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    // The first piece names the call and carries its id; the rest add to its arguments.
    expect(deltas[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
    expect(deltas[0]?.id).toMatch(/^call_\w+$/);
    expect(
      deltas.slice(1).every((d) => d.index === 0 && d.id === undefined && d.function?.name === undefined),
    ).toBe(true);
    const streamedArgs = JSON.parse(deltas.map((d) => d.function?.arguments ?? "").join("")) as Record<
      string,
      unknown
    >;
    expect(["Paris", "Oslo", "Lima"]).toContain(streamedArgs["city"]);
    expect([1, 2, 3]).toContain(streamedArgs["days"]);

    // Not streamed: the same call (greedy), whole.
    const whole = await client.chat.completions.create({
      model: "tiny",
      messages: ask,
      tools: [weather, time],
      tool_choice: forced,
      temperature: 0,
    });
    expect(whole.choices[0]?.finish_reason).toBe("tool_calls");
    const call = whole.choices[0]?.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("get_weather");
    expect(JSON.parse(call.function.arguments)).toEqual(streamedArgs);

    // "required" with two tools: a call of one of them.
    const required = await client.chat.completions.create({
      model: "tiny",
      messages: ask,
      tools: [weather, time],
      tool_choice: "required",
      temperature: 0,
    });
    const any = required.choices[0]?.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(["get_weather", "get_time"]).toContain(any.function.name);
    expect(typeof JSON.parse(any.function.arguments)).toBe("object");
    expect(required.choices[0]?.finish_reason).toBe("tool_calls");

    // The result goes back as a tool message: the model reads it (the prompt grows by it) and answers.
    const back = (result: string) =>
      client.chat.completions.create({
        model: "tiny",
        messages: [
          ...ask,
          { role: "assistant", content: null, tool_calls: [call] },
          { role: "tool", tool_call_id: call.id, content: result },
        ],
        tools: [weather, time],
        max_tokens: 6,
        temperature: 0,
      });
    const short = await back("sunny");
    const long = await back(`sunny, ${"warm ".repeat(20)}`);
    expect(short.choices[0]?.message.content).toHaveLength(6);
    expect((long.usage?.prompt_tokens ?? 0) - (short.usage?.prompt_tokens ?? 0)).toBeGreaterThanOrEqual(100);
    // A tool message answering no call, or a call left unanswered, is refused naming the message.
    expect(
      await refusal(
        client.chat.completions.create({
          model: "tiny",
          messages: [...ask, { role: "tool", tool_call_id: "call_nowhere", content: "x" }],
        }),
      ),
    ).toMatchObject({ status: 400, param: "messages[1].tool_call_id" });
    expect(
      await refusal(
        client.chat.completions.create({
          model: "tiny",
          messages: [
            ...ask,
            { role: "assistant", content: null, tool_calls: [call] },
            { role: "user", content: "?" },
          ],
        }),
      ),
    ).toMatchObject({ status: 400, param: "messages[1].tool_calls" });

    // "auto": the model may answer or call; either way the answer is well-formed.
    const auto = await client.chat.completions.create({
      model: "tiny",
      messages: ask,
      tools: [weather],
      max_tokens: 8,
      temperature: 0,
    });
    expect(["stop", "length", "tool_calls"]).toContain(auto.choices[0]?.finish_reason);
    // The tools reach the model: described in the prompt (node-llama-cpp's function-calling
    // syntax), which "none" leaves out. (The tiny random model never starts a call by itself, so
    // an "auto" call's stream is not driven here; the forced calls above stream the same deltas.)
    const none = await client.chat.completions.create({
      model: "tiny",
      messages: ask,
      tools: [weather],
      tool_choice: "none",
      max_tokens: 8,
      temperature: 0,
    });
    expect((auto.usage?.prompt_tokens ?? 0) - (none.usage?.prompt_tokens ?? 0)).toBeGreaterThan(50);
  }, 180_000);

  it("makes a json_schema answer that parses against its schema, and a json_object answer that is JSON", async () => {
    await using h = await createHarness({ handler: llmHandler(tinyConfig()) });
    const client = openai(h);
    const schema = {
      type: "object",
      properties: {
        ok: { type: "boolean" },
        size: { enum: ["s", "m", "l"] },
        tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 },
      },
      required: ["ok", "size", "tags"],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "describe it" }],
        response_format: { type: "json_schema", json_schema: { name: "shape", schema, strict: true } },
        temperature: 1,
        seed,
      });
      expect(r.choices[0]?.finish_reason).toBe("stop");
      const value = JSON.parse(r.choices[0]?.message.content ?? "") as Record<string, unknown>;
      expect(Object.keys(value).sort()).toEqual(["ok", "size", "tags"]);
      expect(typeof value["ok"]).toBe("boolean");
      expect(["s", "m", "l"]).toContain(value["size"]);
      expect(Array.isArray(value["tags"])).toBe(true);
      expect((value["tags"] as unknown[]).length).toBeLessThanOrEqual(3);
      for (const tag of value["tags"] as unknown[]) expect(["a", "b"]).toContain(tag);
    }
    const object = await client.chat.completions.create({
      model: "tiny",
      messages: hi,
      response_format: { type: "json_object" },
      max_tokens: 64,
      temperature: 0,
    });
    // Cut at 64 tokens or not, a JSON object is what it begins.
    expect(object.choices[0]?.message.content).toMatch(/^\s*\{/);
  }, 180_000);
});

describe("examples/llm: sequences and the model's download (issues 53.5, 51.11, 51.13)", () => {
  it("hands a freed sequence to the waiting generation at once, not after the next generation ends", async () => {
    const llm = await loadLlm({ modelPath, parallel: 2, contextSize: 512, threads: 1 });
    try {
      const signal = new AbortController().signal;
      const ended: string[] = [];
      const firstToken: string[] = [];
      const run = async (name: string, maxTokens: number) => {
        const gen = llm.complete("abc", { maxTokens, temperature: 0, signal });
        let step = await gen.next();
        firstToken.push(name);
        while (step.done !== true) step = await gen.next();
        ended.push(name);
        return step.value as GenerationEnd;
      };
      // long and short take the two sequences; waiting gets short's as soon as short ends.
      const long = run("long", 400);
      const short = run("short", 8);
      const waiting = run("waiting", 8);
      await Promise.all([long, short, waiting]);
      expect(ended.indexOf("short")).toBeLessThan(ended.indexOf("long"));
      expect(ended.indexOf("waiting")).toBeLessThan(ended.indexOf("long"));
    } finally {
      await llm.release();
    }
  }, 120_000);

  it("sweeps a download a killed worker left (.partial), and the warm cache never mirrors one", async () => {
    const gguf = tinyLlamaGguf();
    const server = createServer((req, res) => {
      if (req.url === "/m/tiny.gguf") res.end(gguf);
      else if (req.url === "/loop") res.writeHead(302, { location: "/loop" }).end();
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const models = join(dir, "swept");
    await mkdir(models, { recursive: true });
    // A pid that ran and ended (the killed download's), and one that runs (another worker's, still going).
    const ended = spawn(process.execPath, ["-e", ""]);
    await new Promise((resolve) => ended.once("close", resolve));
    const running = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"]);
    try {
      const url = `${base}/m/tiny.gguf`;
      const name = `${createHash("sha256").update(url).digest("hex").slice(0, 12)}-tiny.gguf`;
      const stale = `${name}.${ended.pid}.partial`;
      const live = `${name}.${running.pid}.partial`;
      await writeFile(join(models, stale), gguf.subarray(0, 100));
      await writeFile(join(models, live), gguf.subarray(0, 100));
      // Before the download: the scan the warm cache syncs from leaves .partial files out.
      const scan = await scanLocal([{ path: models, name: "llm-models" }]);
      expect(scan.files).toEqual([]);
      const path = await fetchModel(url, { dir: models });
      expect((await readdir(models)).sort()).toEqual([name, live].sort());
      expect(path).toBe(join(models, name));
      expect((await scanLocal([{ path: models, name: "llm-models" }])).files.map((f) => f.path)).toEqual([
        name,
      ]);

      // A URL that redirects to itself: setup's error says so, not "fetch failed".
      await expect(fetchModel(`${base}/loop`, { dir: models })).rejects.toThrow(
        `downloading the model from ${base}/loop failed: it redirects more than 20 times (a redirect loop?)`,
      );
      // A port nothing listens on: the cause is named too.
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      await expect(fetchModel(`http://127.0.0.1:${port}/m.gguf`, { dir: models })).rejects.toThrow(
        `downloading the model from http://127.0.0.1:${port}/m.gguf failed: connect ECONNREFUSED 127.0.0.1:${port}`,
      );
    } finally {
      running.kill();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }, 60_000);
});
