import { createHarness } from "runlet/testing";
import { describe, expect, it } from "vitest";
import handler from "../src/handler.js";

/** POSTs an OpenAI request to the local platform's /openai/v1 routes, as any OpenAI client does. */
function post(h: { url: string; apiKey: string }, path: string, body: unknown): Promise<Response> {
  return fetch(`${h.url}/v2/local/openai/v1/${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const messages = [{ role: "user", content: "one two three" }];

describe("handler", () => {
  it("answers a chat completion", async () => {
    await using h = await createHarness({ handler });
    const res = await post(h, "chat/completions", { model: "my-model", messages });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content).toBe("You said: one two three");
  });

  it("streams the same text as server-sent events", async () => {
    await using h = await createHarness({ handler });
    const res = await post(h, "chat/completions", { model: "my-model", messages, stream: true });
    const events = (await res.text()).split("\n\n").filter((e) => e !== "");
    expect(events.at(-1)).toBe("data: [DONE]");
    const text = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice("data: ".length)) as { choices: { delta: { content?: string } }[] })
      .map((chunk) => chunk.choices[0]?.delta.content ?? "")
      .join("");
    expect(text).toBe("You said: one two three");
  });

  it("answers the Responses API through chat", async () => {
    await using h = await createHarness({ handler });
    const res = await post(h, "responses", { model: "my-model", input: "one two three" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; output: { content: { text: string }[] }[] };
    expect(body.status).toBe("completed");
    expect(body.output[0]?.content[0]?.text).toBe("You said: one two three");
  });

  it("answers 400 naming the field when the body is invalid", async () => {
    await using h = await createHarness({ handler });
    const res = await post(h, "chat/completions", { model: "my-model", messages: [] });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { type: string; param: string } };
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.param).toBe("messages");
  });
});
