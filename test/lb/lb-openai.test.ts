import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { call, startLbWorker } from "../support/lb-support.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * A `defineOpenAIHandler` handler served by a load-balancing worker on the OpenAI routes
 * themselves (docs/load-balancing.md, "OpenAI routes"), driven by the official `openai` client.
 */

const definition = defineOpenAIHandler({
  models: ["echo-1"],
  async *chat(request) {
    const last = request.messages.at(-1);
    const text = typeof last?.content === "string" ? last.content : "";
    for (const word of text.split(" ")) yield `${word} `;
  },
});

describe("OpenAI routes on a load-balancing worker", () => {
  it("streams a chat completion to the official client, answers whole, lists models and names errors", async () => {
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const client = new OpenAI({ apiKey: "unused-locally", baseURL: `${lb.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "echo-1",
      messages: [{ role: "user", content: "one two three" }],
      stream: true,
    });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(chunks).toBeGreaterThanOrEqual(3);
    expect(text).toBe("one two three ");
    const whole = await client.chat.completions.create({
      model: "echo-1",
      messages: [{ role: "user", content: "four five" }],
    });
    expect(whole.choices[0]?.message.content).toBe("four five ");
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["echo-1"]);
    const missing = await client.chat.completions
      .create({ model: "nope", messages: [{ role: "user", content: "x" }] })
      .catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("serves the Responses API and one model by id, as the queue's OpenAI route does", async () => {
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const client = new OpenAI({ apiKey: "unused-locally", baseURL: `${lb.url}/v1`, maxRetries: 0 });
    const answer = await client.responses.create({ model: "echo-1", input: "six seven" });
    expect(answer.output_text).toBe("six seven ");
    const events: string[] = [];
    let text = "";
    for await (const event of await client.responses.create({
      model: "echo-1",
      input: "eight nine",
      stream: true,
    })) {
      events.push(event.type);
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    expect(text).toBe("eight nine ");
    expect(events[0]).toBe("response.created");
    expect(events.at(-1)).toBe("response.completed");
    expect((await client.models.retrieve("echo-1")).id).toBe("echo-1");
    const gone = await client.models.retrieve("nope").catch((err: unknown) => err);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("streams through the harness's load-balancing endpoint to the official client", async () => {
    await using lb = await startLbWorker(definition);
    await using harness = await startHarness({ loadBalancers: [{ id: "llm", healthIntervalMs: 30 }] });
    const balancer = harness.loadBalancer("llm");
    balancer.addWorker({ id: "w1", url: lb.url });
    await waitFor("the worker ready", () => balancer.workers()[0]?.health === "ready");
    const client = new OpenAI({ apiKey: harness.apiKey, baseURL: `${harness.url}/lb/llm/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({
        model: "echo-1",
        messages: [{ role: "user", content: "through the balancer" }],
        stream: true,
      })
      .withResponse();
    expect(response.headers.get("x-runpod-worker-id")).toBe("w1");
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("through the balancer ");
  });
});
