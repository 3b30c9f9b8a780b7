import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import handler from "../../examples/openai-chat/handler.js";
import { createHarness } from "../../src/testing/index.js";

/** The official `openai` client, unmodified, pointed at the harness's OpenAI routes. */
function openai(h: { url: string; apiKey: string }, apiKey = h.apiKey): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
}

const messages = [{ role: "user" as const, content: "hello there" }];

describe("examples/openai-chat through the official openai client", () => {
  it("answers a chat completion with the model's text and the handler's usage", async () => {
    await using h = await createHarness({ handler });
    const r = await openai(h).chat.completions.create({ model: "echo-1", messages });
    expect(r.id).toMatch(/^chatcmpl-sync-/);
    expect(r).toEqual({
      id: r.id,
      object: "chat.completion",
      created: r.created,
      model: "echo-1",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "You said: hello there", refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 },
    });
    // The job behind it is an ordinary one, visible through the job API.
    const job = h.harness.job(r.id.slice("chatcmpl-".length));
    expect(job?.status).toBe("COMPLETED");
  });

  it("streams the same text, one id and created throughout, with a usage chunk for include_usage", async () => {
    await using h = await createHarness({ handler });
    const client = openai(h);
    const whole = await client.chat.completions.create({ model: "echo-1", messages });
    const stream = await client.chat.completions.create({
      model: "echo-1",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe(whole.choices[0]?.message.content);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(new Set(chunks.map((c) => c.created)).size).toBe(1);
    expect(chunks.map((c) => c.object)).toEqual(Array(chunks.length).fill("chat.completion.chunk"));
    expect(chunks[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage).toEqual(whole.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it("serves completions both ways, and stops at max_tokens with finish_reason length", async () => {
    await using h = await createHarness({ handler });
    const client = openai(h);
    const whole = await client.completions.create({ model: "echo-1", prompt: "one two three" });
    expect(whole.object).toBe("text_completion");
    expect(whole.choices).toEqual([
      { index: 0, text: "You said: one two three", logprobs: null, finish_reason: "stop" },
    ]);
    expect(whole.usage).toEqual({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
    const stream = await client.completions.create({
      model: "echo-1",
      prompt: "one two three",
      stream: true,
    });
    const parts: string[] = [];
    const finishes: unknown[] = [];
    for await (const chunk of stream) {
      parts.push(chunk.choices[0]?.text ?? "");
      finishes.push(chunk.choices[0]?.finish_reason);
    }
    expect(parts.join("")).toBe("You said: one two three");
    expect(finishes.at(-1)).toBe("stop");
    const short = await client.completions.create({
      model: "echo-1",
      prompt: "one two three",
      max_tokens: 2,
    });
    expect(short.choices[0]?.text).toBe("You said:");
    expect(short.choices[0]?.finish_reason).toBe("length");
    expect(short.usage?.completion_tokens).toBe(2);
  });

  it("lists the handler's models", async () => {
    await using h = await createHarness({ handler });
    const ids = [];
    for await (const model of openai(h).models.list()) ids.push(model.id);
    expect(ids).toEqual(["echo-1"]);
  });

  it("raises BadRequestError naming the field for an invalid body, streamed or not", async () => {
    await using h = await createHarness({ handler });
    const client = openai(h);
    for (const stream of [false, true]) {
      const err = await client.chat.completions
        .create({ model: "echo-1", messages: [{ role: "wizard", content: "x" }] as never, stream })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      const bad = err as InstanceType<typeof OpenAI.BadRequestError>;
      expect(bad.status).toBe(400);
      expect(bad.type).toBe("invalid_request_error");
      expect(bad.param).toBe("messages[0].role");
      expect(bad.message).toContain("'messages[0].role'");
    }
    const missing = await client.chat.completions.create({ model: "echo-1" } as never).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.BadRequestError>,
    );
    expect(missing?.param).toBe("messages");
    expect(missing?.code).toBe("missing_required_parameter");
  });

  it("raises NotFoundError for a model the handler does not serve", async () => {
    await using h = await createHarness({ handler });
    const err = await openai(h)
      .chat.completions.create({ model: "gpt-nothing", messages })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });

  it("raises AuthenticationError for a wrong key", async () => {
    await using h = await createHarness({ handler });
    const err = await openai(h, "not-the-key")
      .chat.completions.create({ model: "echo-1", messages })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((err as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
  });

  it("still runs plain jobs through runlet/client on the same endpoint", async () => {
    await using h = await createHarness({ handler });
    const record = await h.endpoint.runsync({ input: { text: "hi" } });
    expect(record.status).toBe("COMPLETED");
    expect(record.output).toEqual({ echo: { text: "hi" } });
  });
});
