import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromEnv, llmHandler } from "../../examples/llm/handler.js";
import { writeTinyModel } from "../../examples/llm/tiny-model.js";
import { call, startLbWorker } from "../support/lb-support.js";
import { waitForAsync } from "../support/wait-for.js";

/**
 * The llm starter (examples/llm re-exports it) as a load-balancing worker, the endpoint kind the
 * platform recommends for LLMs (docs/load-balancing.md): the tiny GGUF on llama.cpp's CPU build,
 * served on /v1 directly and driven by the official `openai` client — chat streamed and whole,
 * the Responses API, and an OpenAI error for a refused parameter.
 */

let dir: string;
let modelPath: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "runlet-lb-llm-"));
  modelPath = await writeTinyModel(join(dir, "tiny.gguf"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the llm starter as a load-balancing worker", () => {
  it("serves chat, streamed and whole, and the Responses API on /v1, and names a refused parameter", async () => {
    const handler = llmHandler({
      ...configFromEnv({}),
      model: modelPath,
      modelId: "tiny",
      parallel: 2,
      contextSize: 512,
      threads: 1,
    });
    await using lb = await startLbWorker(handler);
    // Health says 204 while the model loads in setup, then 200.
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const client = new OpenAI({ apiKey: "unused-locally", baseURL: `${lb.url}/v1`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "hi" }];

    const stream = await client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 8,
      temperature: 0,
      stream: true,
    });
    const deltas: string[] = [];
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    expect(deltas.length).toBe(8);
    expect(finish).toBe("length");

    // Greedy: the whole answer is the streamed text.
    const whole = await client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 8,
      temperature: 0,
    });
    expect(whole.choices[0]?.message.content).toBe(deltas.join(""));
    expect(whole.usage?.completion_tokens).toBe(8);

    const response = await client.responses.create({
      model: "tiny",
      input: "hi",
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(response.status).toBe("incomplete");
    expect(response.output_text.length).toBeGreaterThan(0);

    const refused = await client.chat.completions
      .create({ model: "tiny", messages, logprobs: true })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("logprobs");
  }, 60_000);
});
