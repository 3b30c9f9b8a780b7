import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { followJobs } from "../../src/cli/job-log.js";
import { defineHandler } from "../../src/index.js";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { createHarness } from "../../src/testing/index.js";
import { waitFor } from "../support/workers.js";

/** POSTs (or GETs) to the harness's OpenAI route of endpoint `local`. */
function call(
  h: { url: string; apiKey: string },
  path: string,
  body?: unknown,
  init: { key?: string; method?: string } = {},
): Promise<Response> {
  return fetch(`${h.url}/v2/local/openai/v1/${path}`, {
    method: init.method ?? (body === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${init.key ?? h.apiKey}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** A handler that answers the job's `input` back, as the worker received it. */
const echoInput = defineHandler({ handler: ({ job }) => ({ received: job.raw.input }) });

describe("the harness's /openai/v1/* routes", () => {
  it("turns a request into a job whose input is {openai_route, openai_input}, as the worker receives it", async () => {
    await using h = await createHarness({ handler: echoInput });
    const lines: string[] = [];
    const log = followJobs(h.harness, (line) => lines.push(line));
    const body = { model: "m", messages: [{ role: "user", content: "hi" }], top_k: 3 };
    const res = await call(h, "chat/completions", body);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      received: { openai_route: "/v1/chat/completions", openai_input: body },
    });
    const jobId = res.headers.get("x-request-id")!;
    expect(h.harness.job(jobId)?.status).toBe("COMPLETED");
    // `runlet dev`'s job log shows it like any job.
    log.stop();
    expect(lines).toEqual([expect.stringMatching(new RegExp(`^job ${jobId} COMPLETED in \\d+ ms`))]);
    const models = await call(h, "models");
    expect(await models.json()).toEqual({ received: { openai_route: "/v1/models", openai_input: {} } });
    // Any path is forwarded: the worker decides what it serves.
    const other = await call(h, "embeddings", { input: "x" });
    expect(await other.json()).toEqual({
      received: { openai_route: "/v1/embeddings", openai_input: { input: "x" } },
    });
  });

  it("writes runlet's chunks with exact SSE framing, ending with [DONE]", async () => {
    const handler = defineOpenAIHandler({
      models: ["m"],
      *chat() {
        yield "a";
        yield "b";
      },
    });
    await using h = await createHarness({ handler });
    const res = await call(h, "chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const text = await res.text();
    const jobId = res.headers.get("x-request-id")!;
    const created = (JSON.parse(text.split("\n")[0]!.slice("data: ".length)) as { created: number }).created;
    const head = `{"id":"chatcmpl-${jobId}","object":"chat.completion.chunk","created":${created},"model":"m","choices":[{"index":0,`;
    expect(text).toBe(
      `data: ${head}"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n` +
        `data: ${head}"delta":{"content":"a"},"logprobs":null,"finish_reason":null}]}\n\n` +
        `data: ${head}"delta":{"content":"b"},"logprobs":null,"finish_reason":null}]}\n\n` +
        `data: ${head}"delta":{},"logprobs":null,"finish_reason":"stop"}]}\n\n` +
        "data: [DONE]\n\n",
    );
  });

  it("relays pre-framed SSE strings byte for byte, and frames object items, adding [DONE] only when missing", async () => {
    const batches = [
      'data: {"n":1}\n\ndata: {"n":2}\n\n',
      'data: {"n":3,"text":"é \\u00e9"}\n\n',
      "data: [DONE]\n\n",
    ];
    const handler = defineHandler({
      *handler({ input }) {
        const body = (input as { openai_input: { objects?: boolean } }).openai_input;
        if (body.objects === true) {
          yield { n: 1 };
          yield [{ n: 2 }, { n: 3 }];
          return;
        }
        yield* batches;
      },
    });
    await using h = await createHarness({ handler });
    const raw = await call(h, "chat/completions", { stream: true });
    expect(await raw.text()).toBe(batches.join(""));
    const objects = await call(h, "chat/completions", { stream: true, objects: true });
    expect(await objects.text()).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: [DONE]\n\n');
  });

  it("answers the element of a one-item aggregated output when not streaming", async () => {
    const handler = defineHandler({
      returnAggregateStream: true,
      *handler() {
        yield { object: "chat.completion", choices: [] };
      },
    });
    await using h = await createHarness({ handler });
    const res = await call(h, "chat/completions", { model: "m" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: "chat.completion", choices: [] });
  });

  it("answers errors in OpenAI's shape: wrong key 401, unknown route 404, bad JSON 400, failed job 500", async () => {
    const handler = defineOpenAIHandler({
      models: ["m"],
      // biome-ignore lint/correctness/useYield: fails before its first token
      *chat() {
        throw new Error("the GPU fell over");
      },
    });
    await using h = await createHarness({ handler });
    const wrongKey = await call(h, "models", undefined, { key: "nope" });
    expect(wrongKey.status).toBe(401);
    expect(await wrongKey.json()).toEqual({
      error: {
        message: "missing or wrong API key",
        type: "invalid_request_error",
        param: null,
        code: "invalid_api_key",
      },
    });
    const unknown = await call(h, "embeddings", { model: "m", input: "x" });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: {
        message: "this endpoint does not serve /v1/embeddings",
        type: "not_found_error",
        param: null,
        code: "unknown_route",
      },
    });
    const badPath = await fetch(`${h.url}/v2/local/openai/v2/chat`, {
      method: "POST",
      headers: { authorization: h.apiKey },
    });
    expect(badPath.status).toBe(404);
    expect(((await badPath.json()) as { error: { code: string } }).error.code).toBe("unknown_url");
    const badJson = await fetch(`${h.url}/v2/local/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: h.apiKey },
      body: "{nope",
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
    const failed = await call(h, "chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
    });
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({
      error: { message: "Error: the GPU fell over", type: "server_error", param: null, code: "job_failed" },
    });
  });

  it("answers an OpenAI error output (vLLM's shape, status in code) and a timeout with their statuses", async () => {
    const handler = defineHandler({
      async handler({ input, signal }) {
        const body = (input as { openai_input: { wait?: boolean } }).openai_input;
        if (body.wait === true) await new Promise((resolve) => signal.addEventListener("abort", resolve));
        return {
          error: { message: "max_tokens is too large", type: "BadRequestError", param: null, code: 400 },
        };
      },
    });
    await using h = await createHarness({ endpoints: [{ id: "local", handler, executionTimeoutMs: 300 }] });
    const bad = await call(h, "completions", { model: "m" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({
      error: { message: "max_tokens is too large", type: "BadRequestError", param: null, code: 400 },
    });
    const slow = await call(h, "completions", { model: "m", wait: true });
    expect(slow.status).toBe(504);
    expect(await slow.json()).toEqual({
      error: {
        message: "job timed out after 300 ms (executionTimeout)",
        type: "server_error",
        param: null,
        code: "timeout",
      },
    });
  });

  it("answers 404 job_deleted when the endpoint is removed while the request waits", async () => {
    await using h = await createHarness({ endpoints: [{ id: "local" }] }); // no worker: the job waits
    const pending = call(h, "models");
    await waitFor("the queued job", () => h.harness.health("local").jobs.inQueue === 1);
    await h.harness.removeEndpoint("local");
    const res = await pending;
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("job_deleted");
  });

  it("shows its jobs in /status and /health, and /cancel ends the stream with an error event", async () => {
    let signalFired = false;
    const handler = defineOpenAIHandler({
      models: ["m"],
      async *chat(_request, { signal }) {
        yield "first";
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        signalFired = true;
      },
    });
    await using h = await createHarness({ handler });
    const res = await call(h, "chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    const jobId = res.headers.get("x-request-id")!;
    const reader = res.body!.getReader();
    await reader.read(); // the stream has started
    expect((await h.endpoint.status(jobId)).status).toBe("IN_PROGRESS");
    expect((await h.endpoint.health()).jobs.inProgress).toBe(1);
    await h.endpoint.cancel(jobId);
    let text = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      text += new TextDecoder().decode(r.value);
    expect(
      text.endsWith(
        'data: {"error":{"message":"the job was cancelled","type":"server_error","param":null,"code":"job_cancelled"}}\n\n',
      ),
    ).toBe(true);
    expect(text).not.toContain("[DONE]");
    await waitFor("the handler's signal", () => signalFired);
  });

  it("cancels the job and fires the handler's signal when the openai client aborts its stream", async () => {
    let signalFired = false;
    const handler = defineOpenAIHandler({
      models: ["m"],
      async *chat(_request, { signal }) {
        yield "first";
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        signalFired = true;
      },
    });
    await using h = await createHarness({ handler });
    const client = new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "x" }], stream: true })
      .withResponse();
    const jobId = response.headers.get("x-request-id")!;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content === "first") break; // leaving the loop aborts the request
    }
    const job = await h.harness.waitForJob(jobId);
    expect(job.status).toBe("CANCELLED");
    await waitFor("the handler's signal", () => signalFired);
  });

  it("enforces the openai rate-limit row: 429 with Retry-After, then the openai client's own retry succeeds", async () => {
    const handler = defineOpenAIHandler({
      models: ["m"],
      *chat() {
        yield "ok";
      },
    });
    await using h = await createHarness({
      handler,
      // One request per 1 s window; workers do not raise it. The client's retry waits the
      // Retry-After second, so it always lands in a new window, however slow the machine.
      rateLimits: {
        rules: { openai: { perWindow: 1, concurrent: null } },
        windowMs: 1_000,
        requestsPerWorker: 0,
      },
    });
    const statuses: number[] = [];
    const client = new OpenAI({
      apiKey: h.apiKey,
      baseURL: `${h.url}/v2/local/openai/v1`,
      maxRetries: 2,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        statuses.push(res.status);
        return res;
      },
    });
    const first = await call(h, "chat/completions", {
      model: "m",
      messages: [{ role: "user", content: "x" }],
    });
    expect(first.status).toBe(200);
    const limited = await call(h, "models");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("1");
    expect(((await limited.json()) as { error: { type: string } }).error.type).toBe("rate_limit_error");
    // The job routes have their own rows: /runsync is not held back by the openai row.
    expect((await h.endpoint.runsync({ input: {} })).status).toBe("FAILED");
    const r = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "x" }],
    });
    expect(r.choices[0]?.message.content).toBe("ok");
    expect(statuses).toEqual([429, 200]);
  });
});
