import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { createHarness } from "../../src/testing/index.js";
import { eventsOf, fixtureSidecar, freePort, scratch } from "../support/sidecar-rig.js";
import { waitFor } from "../support/workers.js";

// defineOpenAIHandler's relay form through the harness, called with the official openai client;
// the sidecar is the fixture model server (a real process) that records every request and every
// client that hung up on it.

function openai(h: { url: string; apiKey: string }): OpenAI {
  return new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
}

async function relayHarness(env: Record<string, string>, more: { executionTimeoutMs?: number } = {}) {
  const port = await freePort();
  const handler = defineOpenAIHandler({
    models: ["m", "missing"],
    sidecar: fixtureSidecar(port, env),
    relay: { upstreamModels: { m: "fixture-model" } },
    ...more,
  });
  return createHarness({ handler });
}

const ask = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };

describe("defineOpenAIHandler({ relay }) to a sidecar", () => {
  it("refuses relay without a sidecar, or beside chat", () => {
    expect(() => defineOpenAIHandler({ models: ["m"], relay: true })).toThrow(
      "defineOpenAIHandler: relay needs a sidecar option (the server to relay to)",
    );
    expect(() =>
      defineOpenAIHandler({
        models: ["m"],
        relay: true,
        sidecar: { command: ["x"], ready: { port: 1 } },
        *chat() {},
      }),
    ).toThrow("give relay or chat/completions, not both");
  });

  it("relays a chat request and its answer, with the upstream model name", async () => {
    using tmp = scratch();
    await using h = await relayHarness({ EVENTS_FILE: tmp.events });
    const answer = await openai(h).chat.completions.create(ask);
    expect(answer.choices[0]?.message.content).toBe("hello from the sidecar");
    expect(answer.usage).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    const request = eventsOf(tmp.events).find((e) => e.event === "request")!;
    expect(request).toMatchObject({ path: "/v1/chat/completions", model: "fixture-model", stream: false });
    const completion = await openai(h).completions.create({ model: "m", prompt: "x", max_tokens: 2 });
    expect(completion.choices[0]?.text).toBe("hello from");
  }, 60_000);

  it("streams the sidecar's events through as they come", async () => {
    await using h = await relayHarness({});
    const stream = await openai(h).chat.completions.create({ ...ask, stream: true });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("hello from the sidecar");
    // The sidecar's own chunks, untouched (its ids, its finish chunk).
    expect(chunks.every((c) => /^fx-\d+$/.test(c.id))).toBe(true);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
  }, 60_000);

  it("answers the sidecar's own error with its status", async () => {
    await using h = await relayHarness({});
    const err = await openai(h)
      .chat.completions.create({ ...ask, model: "missing" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
      message: "model 'missing' not loaded",
      type: "not_found_error",
      code: "model_not_found",
    });
  }, 60_000);

  it("cancels the upstream request when the client hangs up", async () => {
    using tmp = scratch();
    await using h = await relayHarness({ EVENTS_FILE: tmp.events, WORD_DELAY_MS: "200" });
    const stream = await openai(h).chat.completions.create({ ...ask, stream: true, max_tokens: 500 });
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content === "hello") break; // leaving the loop aborts the request
    }
    const request = await waitFor("the upstream request", () =>
      eventsOf(tmp.events).find((e) => e.event === "request"),
    );
    // 500 words at 200 ms would take 100 s: the sidecar hears the hang-up long before.
    const hungUp = await waitFor("the sidecar to see the hang-up", () =>
      eventsOf(tmp.events).find((e) => e.event === "hung-up"),
    );
    expect(hungUp["id"]).toBe(request["id"]);
    expect(eventsOf(tmp.events).some((e) => e.event === "done")).toBe(false);
  }, 60_000);

  it("cancels the upstream request at the job's deadline", async () => {
    using tmp = scratch();
    await using h = await relayHarness(
      { EVENTS_FILE: tmp.events, WORD_DELAY_MS: "200" },
      { executionTimeoutMs: 1_500 },
    );
    const stream = await openai(h).chat.completions.create({ ...ask, stream: true, max_tokens: 500 });
    const read = (async () => {
      for await (const _ of stream) {
        // reading until the stream ends or fails
      }
    })().catch((e: unknown) => e);
    const hungUp = await waitFor("the sidecar to see the cancel", () =>
      eventsOf(tmp.events).find((e) => e.event === "hung-up"),
    );
    expect(hungUp["id"]).toMatch(/^fx-\d+$/);
    await read;
  }, 60_000);
});
