import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { APICallError, generateText, RetryError, streamText } from "ai";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import {
  type ChatCompletionRequest,
  defineOpenAIHandler,
  type OpenAIHandlerOptions,
} from "../../src/openai/index.js";
import { createHarness, type TestHarness } from "../../src/testing/index.js";
import { waitFor } from "../support/workers.js";

/**
 * The harness's OpenAI route as application code meets it: through the official `openai` client
 * and the AI SDK's two providers (`@ai-sdk/openai`, whose default model speaks the Responses
 * API, and `@ai-sdk/openai-compatible`), against a small deterministic handler — "You said:
 * <words>" one word per item — run by a real worker over the harness's HTTP routes.
 */

/** The last user message's text (string or text parts). */
function lastUserText(request: ChatCompletionRequest): string {
  const content = request.messages.findLast((m) => m.role === "user")?.content;
  if (typeof content === "string") return content;
  return (content ?? []).map((part) => (typeof part["text"] === "string" ? part["text"] : "")).join(" ");
}

/**
 * The stand-in: answers "You said: <text>", records every job it runs, and on its first job only
 * misbehaves as the text asks ("hang" waits for the job's signal, "fail" throws), so a client
 * that sends the request again gets an answer the second time and the test sees the retry.
 */
function standIn(options: Partial<OpenAIHandlerOptions> = {}) {
  const jobs: string[] = [];
  const handler = defineOpenAIHandler({
    models: ["echo-1"],
    ...options,
    async *chat(request, { signal, job }) {
      jobs.push(job.id);
      const text = lastUserText(request);
      if (jobs.length === 1 && text === "hang") {
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return;
      }
      if (jobs.length === 1 && text === "fail") throw new Error("the model fell over");
      const words = `You said: ${text}`.split(" ");
      for (const [i, word] of words.entries()) yield i === 0 ? word : ` ${word}`;
      return { usage: { prompt_tokens: text.split(" ").length } };
    },
  });
  return { handler, jobs };
}

const baseURL = (h: TestHarness) => `${h.url}/v2/local/openai/v1`;

/** The official client with its default retries (2). */
const openai = (h: TestHarness) => new OpenAI({ apiKey: h.apiKey, baseURL: baseURL(h) });

/** Cancels the job the stand-in is running (its first). */
async function cancelFirst(h: TestHarness, jobs: readonly string[]): Promise<void> {
  await waitFor("the first job to run", () => jobs.length === 1);
  await h.endpoint.cancel(jobs[0]!);
}

describe("OpenAI clients against the harness's OpenAI route", () => {
  describe("a job's end is not sent again as a new job", () => {
    it("openai: a cancelled job answers 499 with x-should-retry: false, and the client does not retry", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const call = openai(h)
        .chat.completions.create({ model: "echo-1", messages: [{ role: "user", content: "hang" }] })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      await cancelFirst(h, jobs);
      const err = await call;
      expect(err).toBeInstanceOf(OpenAI.APIError);
      const apiError = err as InstanceType<typeof OpenAI.APIError>;
      expect(apiError.status).toBe(499);
      expect(apiError.headers?.get("x-should-retry")).toBe("false");
      expect(apiError.headers?.get("x-request-id")).toBe(jobs[0]);
      expect(apiError.code).toBe("job_cancelled");
      // The client is done with its retries once it raises: one job in all.
      expect(jobs).toHaveLength(1);
    });

    it("openai: a timed-out job answers 504 with x-should-retry: false, not retried", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({
        endpoints: [{ id: "local", handler, executionTimeoutMs: 300 }],
      });
      const err = await openai(h)
        .chat.completions.create({ model: "echo-1", messages: [{ role: "user", content: "hang" }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
      expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get("x-should-retry")).toBe("false");
      expect(jobs).toHaveLength(1);
    });

    it("openai: a failed job answers 500 with x-should-retry: false, not retried", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const err = await openai(h)
        .chat.completions.create({ model: "echo-1", messages: [{ role: "user", content: "fail" }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.InternalServerError);
      expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain("the model fell over");
      expect(jobs).toHaveLength(1);
    });

    it("AI SDK (openai-compatible): a cancelled job is not retried (499 is no status it retries)", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const provider = createOpenAICompatible({ name: "runlet", baseURL: baseURL(h), apiKey: h.apiKey });
      const call = generateText({ model: provider.chatModel("echo-1"), prompt: "hang" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      await cancelFirst(h, jobs);
      const err = await call;
      // A retried call would end in a RetryError (or an answer); a call not retried raises the error itself.
      expect(RetryError.isInstance(err)).toBe(false);
      expect(APICallError.isInstance(err)).toBe(true);
      expect((err as APICallError).statusCode).toBe(499);
      expect((err as APICallError).isRetryable).toBe(false);
      expect(jobs).toHaveLength(1);
    });

    it("AI SDK (openai, Responses API): a cancelled job is not retried", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const provider = createOpenAI({ baseURL: baseURL(h), apiKey: h.apiKey });
      const call = generateText({ model: provider("echo-1"), prompt: "hang" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      await cancelFirst(h, jobs);
      const err = await call;
      expect(APICallError.isInstance(err)).toBe(true);
      expect((err as APICallError).statusCode).toBe(499);
      expect(jobs).toHaveLength(1);
    });
  });

  describe("the Responses API", () => {
    it("openai: responses.create answers with the output text and usage", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const response = await openai(h).responses.create({
        model: "echo-1",
        instructions: "be brief",
        input: "hello there",
      });
      expect(response.object).toBe("response");
      expect(response.status).toBe("completed");
      expect(response.output_text).toBe("You said: hello there");
      expect(response.usage).toMatchObject({ input_tokens: 2, output_tokens: 4, total_tokens: 6 });
      expect(response.instructions).toBe("be brief");
    });

    it("openai: responses.create streams its events in order, and the deltas make the text", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const stream = await openai(h).responses.create({
        model: "echo-1",
        input: [{ role: "user", content: [{ type: "input_text", text: "hello there" }] }],
        stream: true,
      });
      const types: string[] = [];
      let text = "";
      let completed: OpenAI.Responses.Response | undefined;
      const sequence: number[] = [];
      for await (const event of stream) {
        types.push(event.type);
        sequence.push(event.sequence_number);
        if (event.type === "response.output_text.delta") text += event.delta;
        if (event.type === "response.completed") completed = event.response;
      }
      expect(types).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        ...Array.from({ length: 4 }, () => "response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
      ]);
      expect(sequence).toEqual(types.map((_, i) => i));
      expect(text).toBe("You said: hello there");
      expect(completed?.output_text ?? completed?.output).toBeDefined();
      expect(completed?.usage).toMatchObject({ input_tokens: 2, output_tokens: 4 });
    });

    it("openai: a function that fails mid-stream ends the stream with an error event the client raises", async () => {
      const handler = defineOpenAIHandler({
        models: ["echo-1"],
        async *chat() {
          yield "partial";
          throw new Error("the model fell over");
        },
      });
      await using h = await createHarness({ handler });
      const stream = await openai(h).responses.create({ model: "echo-1", input: "x", stream: true });
      const types: string[] = [];
      const err = await (async () => {
        for await (const event of stream) types.push(event.type);
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(types.at(-1)).toBe("response.output_text.delta");
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as Error).message).toContain("the model fell over");
      // On the wire: the Responses API's own error event, numbered after the delta.
      const raw = await fetch(`${baseURL(h)}/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "echo-1", input: "x", stream: true }),
      });
      const events = (await raw.text()).split("\n\n").filter((e) => e !== "");
      const failure = events.find((e) => e.startsWith("event: error\n"));
      expect(JSON.parse(failure!.slice(failure!.indexOf("data: ") + 6))).toMatchObject({
        type: "error",
        sequence_number: 5,
        code: "job_failed",
        message: "the model fell over",
        error: { type: "server_error", code: "job_failed", message: "the model fell over" },
      });
    });

    it("takes the parameters' do-nothing values clients send by default", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const response = (await openai(h).post("/responses", {
        body: {
          model: "echo-1",
          input: [{ type: "message", role: "user", content: "hi" }],
          tools: [],
          tool_choice: "auto",
          include: [],
          reasoning: { effort: null, summary: null },
          background: false,
          top_logprobs: 0,
          previous_response_id: null,
          store: true,
          truncation: "disabled",
          parallel_tool_calls: true,
          metadata: { run: "1" },
          text: { format: { type: "text" } },
        },
      })) as OpenAI.Responses.Response;
      // client.post gives the body as it came (responses.create adds output_text).
      expect((response.output[0] as { content: { text: string }[] }).content[0]?.text).toBe("You said: hi");
      expect((response as unknown as { store: boolean }).store).toBe(false);
      expect(response.metadata).toEqual({ run: "1" });
    });

    it("openai: max_output_tokens ends the response as incomplete", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const response = await openai(h).responses.create({
        model: "echo-1",
        input: "one two three four",
        max_output_tokens: 2,
      });
      expect(response.status).toBe("incomplete");
      expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
      expect(response.output_text).toBe("You said:");
    });

    it("AI SDK (openai): its default model, on the Responses API, answers and streams", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const provider = createOpenAI({ baseURL: baseURL(h), apiKey: h.apiKey });
      const answer = await generateText({ model: provider("echo-1"), prompt: "hello there" });
      expect(answer.text).toBe("You said: hello there");
      expect(answer.usage.inputTokens).toBe(2);
      expect(answer.usage.outputTokens).toBe(4);
      expect(answer.finishReason).toBe("stop");
      const streamed = streamText({ model: provider("echo-1"), system: "be brief", prompt: "hi you" });
      const parts: string[] = [];
      for await (const part of streamed.textStream) parts.push(part);
      expect(parts.join("")).toBe("You said: hi you");
      expect(parts.length).toBeGreaterThan(1);
      expect(await streamed.finishReason).toBe("stop");
    });

    it("AI SDK (openai-compatible): chat answers and streams", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const provider = createOpenAICompatible({
        name: "runlet",
        baseURL: baseURL(h),
        apiKey: h.apiKey,
        includeUsage: true,
      });
      const answer = await generateText({ model: provider.chatModel("echo-1"), prompt: "hello there" });
      expect(answer.text).toBe("You said: hello there");
      const streamed = streamText({ model: provider.chatModel("echo-1"), prompt: "hi you" });
      let text = "";
      for await (const part of streamed.textStream) text += part;
      expect(text).toBe("You said: hi you");
      expect((await streamed.usage).outputTokens).toBe(4);
    });
  });

  describe("what is not served is refused, with the parameter named", () => {
    const refusals: readonly (readonly [string, Record<string, unknown>, string])[] = [
      ["responses", { tools: [{ type: "function", name: "f", parameters: {} }] }, "tools"],
      ["responses", { previous_response_id: "resp_1" }, "previous_response_id"],
      ["responses", { background: true }, "background"],
      ["responses", { include: ["reasoning.encrypted_content"] }, "include"],
      ["responses", { reasoning: { effort: "high" } }, "reasoning"],
      ["responses", { tool_choice: "required" }, "tool_choice"],
      [
        "responses",
        { input: [{ type: "function_call_output", call_id: "c", output: "x", role: "user", content: "" }] },
        "input[0].type",
      ],
      [
        "responses",
        { input: [{ role: "user", content: [{ type: "input_image", image_url: "data:," }] }] },
        "input[0].content[0].type",
      ],
      ["responses", { stream_options: { include_obfuscation: false } }, "stream_options"],
      ["responses", { input: [] }, "input"],
      ["responses", { input: [{ role: "robot", content: "x" }] }, "input[0].role"],
      // Checked as a chat request, named as the Responses API names them (issue 53 review).
      ["responses", { text: { format: { type: "json_schema", schema: {} } } }, "text.format.name"],
      [
        "responses",
        { input: [{ type: "function_call_output", call_id: "c", output: "x" }] },
        "input[0].type",
      ],
      ["chat/completions", { stream_options: { include_usage: true } }, "stream_options"],
      ["chat/completions", { stream: false, stream_options: { include_usage: true } }, "stream_options"],
      ["chat/completions", { stop: ["a", "b", "c", "d", "e"] }, "stop"],
      ["chat/completions", { n: 2 }, "n"],
    ];
    it.each(refusals)("%s %j: 400 naming %s", async (path, extra, param) => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const body =
        path === "responses"
          ? { model: "echo-1", input: "hi", ...extra }
          : { model: "echo-1", messages: [{ role: "user", content: "hi" }], ...extra };
      const err = await openai(h)
        .post(`/${path}`, { body })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      const bad = err as InstanceType<typeof OpenAI.BadRequestError>;
      expect(bad.param).toBe(param);
      expect(bad.type).toBe("invalid_request_error");
      expect(jobs).toHaveLength(0);
    });

    it("too many input items are refused naming input (not the chat request's messages)", async () => {
      const { handler, jobs } = standIn();
      await using h = await createHarness({ handler });
      const input = Array.from({ length: 2_049 }, () => ({ role: "user" as const, content: "x" }));
      const err = await openai(h)
        .responses.create({ model: "echo-1", input })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("input");
      expect((err as Error).message).toBe("400 Invalid value for 'input': expected at most 2048 items.");
      expect(jobs).toHaveLength(0);
    });

    it("a fifth stop entry is refused with a message naming stop and the limit", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const err = await openai(h)
        .chat.completions.create({
          model: "echo-1",
          messages: [{ role: "user", content: "hi" }],
          stop: ["a", "b", "c", "d", "e"],
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect((err as Error).message).toBe(
        "400 Invalid value for 'stop': at most 4 stop sequences are taken, got 5.",
      );
    });
  });

  describe("smaller differences from OpenAI", () => {
    it("serves GET /v1/models/{id}; an unknown model is 404 invalid_request_error model_not_found", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const model = await openai(h).models.retrieve("echo-1");
      expect(model).toMatchObject({ id: "echo-1", object: "model", owned_by: "runlet" });
      const err = await openai(h)
        .models.retrieve("nope")
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err).toMatchObject({ status: 404, type: "invalid_request_error", code: "model_not_found" });
      const chat = await openai(h)
        .chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(chat).toMatchObject({
        status: 404,
        type: "invalid_request_error",
        code: "model_not_found",
        param: "model",
      });
    });

    it("takes null for tools, response_format, user and parallel_tool_calls", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const answer = (await openai(h).post("/chat/completions", {
        body: {
          model: "echo-1",
          messages: [{ role: "user", content: "hi" }],
          tools: null,
          response_format: null,
          user: null,
          parallel_tool_calls: null,
        },
      })) as OpenAI.ChatCompletion;
      expect(answer.choices[0]?.message.content).toBe("You said: hi");
    });

    it("answers refused before a job starts (401, 405, bad JSON) with an x-request-id", async () => {
      const { handler } = standIn();
      await using h = await createHarness({ handler });
      const url = `${baseURL(h)}/chat/completions`;
      const auth = { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" };
      const answers = [
        await fetch(url, { method: "POST", headers: { authorization: "Bearer wrong" }, body: "{}" }),
        await fetch(url, { method: "GET", headers: auth }),
        await fetch(url, { method: "POST", headers: auth, body: "{not json" }),
        await fetch(url, { method: "POST", headers: auth, body: "[1]" }),
      ];
      expect(answers.map((a) => a.status)).toEqual([401, 405, 400, 400]);
      for (const answer of answers) expect(answer.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{24}$/);
    });

    it("max_tokens reads the function's return value: one delta per item, its usage kept", async () => {
      const handler = defineOpenAIHandler({
        models: ["echo-1"],
        async *chat(request) {
          const limit = request.max_tokens ?? 100;
          const tokens = ["a", "b", "c", "d", "e"];
          for (const token of tokens.slice(0, limit)) yield token;
          return {
            finish_reason: limit < tokens.length ? "length" : "stop",
            usage: { prompt_tokens: 7, completion_tokens: Math.min(limit, tokens.length) },
          };
        },
      });
      await using h = await createHarness({ handler });
      const stream = await openai(h).chat.completions.create({
        model: "echo-1",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true },
      });
      const deltas: string[] = [];
      let usage: OpenAI.CompletionUsage | null | undefined;
      let finish: string | null | undefined;
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta.content;
        if (content) deltas.push(content);
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(deltas).toEqual(["a", "b", "c"]);
      expect(finish).toBe("length");
      expect(usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
    });
  });
});
