import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { defineOpenAIHandler, openAIJobError } from "../../src/openai/index.js";
import { createHarness } from "../../src/testing/index.js";

const ask = { model: "m", messages: [{ role: "user" as const, content: "x" }] };

function openai(h: { url: string; apiKey: string }): OpenAI {
  return new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
}

describe("defineOpenAIHandler", () => {
  it("refuses bad options when the module loads, naming the option", () => {
    expect(() => defineOpenAIHandler({ models: [], *chat() {} })).toThrow(
      "defineOpenAIHandler: models must be a non-empty array of model ids or { id } objects",
    );
    expect(() => defineOpenAIHandler({ models: ["m"] })).toThrow("give chat, completions or both");
    expect(() => defineOpenAIHandler({ models: ["m"], *chat() {}, concurrency: 0 })).toThrow(
      "concurrency must be an integer ≥ 1",
    );
  });

  it("fails a plain job with a clear message when there is no plain handler", async () => {
    const handler = defineOpenAIHandler({ models: ["m"], *chat() {} });
    await using h = await createHarness({ handler });
    const record = await h.endpoint.runsync({ input: { prompt: "hi" } });
    expect(record.status).toBe("FAILED");
    expect(record.error).toBe(
      "this endpoint serves OpenAI requests only: the job input needs openai_route (send requests to /openai/v1/...)",
    );
  });

  it("batches frames into fewer stream items with streamCoalesceMs, and the client reads every chunk", async () => {
    const words = Array.from({ length: 50 }, (_, i) => `w${i} `);
    const handler = defineOpenAIHandler({
      models: ["m"],
      streamCoalesceMs: 1_000,
      *chat() {
        yield* words;
      },
    });
    await using h = await createHarness({ handler });
    const { data: stream, response } = await openai(h)
      .chat.completions.create({ ...ask, stream: true })
      .withResponse();
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? "");
    expect(deltas.join("")).toBe(words.join(""));
    // 53 frames (role, 50 words, finish, [DONE]) reached the harness in far fewer stream items.
    const job = h.harness.job(response.headers.get("x-request-id")!);
    expect(job?.stream.length).toBeLessThan(10);
  });

  it("splits a frame over 1 MiB into stream chunks and the client still reads the delta whole", async () => {
    const big = "é".repeat(800_000); // 1.6 MB of UTF-8 in one delta
    const handler = defineOpenAIHandler({
      models: ["m"],
      *chat() {
        yield big;
      },
    });
    await using h = await createHarness({ handler });
    const { data: stream, response } = await openai(h)
      .chat.completions.create({ ...ask, stream: true })
      .withResponse();
    const deltas: string[] = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta.content ?? "");
    expect(deltas).toEqual(["", big, ""]);
    const job = h.harness.job(response.headers.get("x-request-id")!);
    expect(job?.stream.length).toBeGreaterThan(4); // role frame, 2+ parts of the big one, finish, [DONE]
  });

  it("passes unknown body fields to the function and aggregates yielded tool-call chunks", async () => {
    let seen: unknown;
    const handler = defineOpenAIHandler({
      models: ["m"],
      *chat(request) {
        seen = request["top_k"];
        const call = (part: object) => ({
          choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...part }] } }],
        });
        yield call({ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":' } });
        yield call({ function: { arguments: '"Oslo"}' } });
      },
    });
    await using h = await createHarness({ handler });
    const r = await openai(h).chat.completions.create({ ...ask, top_k: 5 } as never);
    expect(seen).toBe(5);
    expect(r.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        refusal: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
        ],
      },
      logprobs: null,
      finish_reason: "tool_calls",
    });
  });

  it("merges tool calls by index as a key: a sparse or huge index gives no null entries and no huge array", async () => {
    const handler = defineOpenAIHandler({
      models: ["m"],
      *chat() {
        const calls = (...parts: object[]) => ({ choices: [{ index: 0, delta: { tool_calls: parts } }] });
        yield calls({ index: 100_000, id: "call_b", function: { name: "b", arguments: "{" } });
        yield calls({ index: 3, id: "call_a", function: { name: "a", arguments: "{}" } });
        yield calls({ index: 100_000, function: { arguments: "}" } });
        yield calls({ index: "x", id: "call_c", function: { name: "c", arguments: "[]" } });
      },
    });
    await using h = await createHarness({ handler });
    const r = await openai(h).chat.completions.create(ask);
    expect(r.choices[0]?.message.tool_calls).toEqual([
      { id: "call_a", type: "function", function: { name: "a", arguments: "{}" } },
      { id: "call_b", type: "function", function: { name: "b", arguments: "{}" } },
      { id: "call_c", type: "function", function: { name: "c", arguments: "[]" } },
    ]);
  });

  it("answers the HTTP error when chat fails before its first item, streamed or not, in one job", async () => {
    const handler = defineOpenAIHandler({
      models: ["m"],
      // biome-ignore lint/correctness/useYield: fails before its first item
      async *chat() {
        throw openAIJobError("the prompt is too long", "invalid_request_error", { param: "messages" });
      },
    });
    await using h = await createHarness({ handler });
    let jobs = 0;
    const stop = h.harness.onJobEvent((event) => {
      if (event.type === "end") jobs++;
    });
    const client = new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1` }); // retries on
    for (const stream of [false, true]) {
      const err = await client.chat.completions.create({ ...ask, stream }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, `stream: ${stream}`).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toEqual({
        message: "the prompt is too long",
        type: "invalid_request_error",
        param: "messages",
        code: null,
      });
    }
    stop();
    expect(jobs).toBe(2);
  });
});
