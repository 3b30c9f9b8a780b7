import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { defineHandler, JobError } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";

/**
 * worker-vllm yields its errors (`{"error": {...}}`) instead of raising, and the platform's Python
 * SDK then fails the job with str() of the inner dict. These are the texts the harness receives,
 * byte for byte (CPython's str() of worker-vllm's dicts, and the same dicts as JSON).
 */
const NOT_FOUND = {
  message: "The model `x` does not exist.",
  type: "NotFoundError",
  param: "model",
  code: 404,
};
const BAD_REQUEST_MESSAGE =
  "1 validation error for ChatCompletionRequest\nmessages\n  Field required [type=missing, input_value={'model': 'x'}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.11/v/missing";
const BAD_REQUEST = { message: BAD_REQUEST_MESSAGE, type: "BadRequestError", param: null, code: 400 };

const CASES = [
  {
    name: "unknown model, Python form",
    text: "{'message': 'The model `x` does not exist.', 'type': 'NotFoundError', 'param': 'model', 'code': 404}",
    error: NOT_FOUND,
  },
  { name: "unknown model, JSON form", text: JSON.stringify(NOT_FOUND), error: NOT_FOUND },
  {
    name: "bad request, Python form",
    // A message with single quotes in it: Python prints it in double quotes.
    text: `{'message': "1 validation error for ChatCompletionRequest\\nmessages\\n  Field required [type=missing, input_value={'model': 'x'}, input_type=dict]\\n    For further information visit https://errors.pydantic.dev/2.11/v/missing", 'type': 'BadRequestError', 'param': None, 'code': 400}`,
    error: BAD_REQUEST,
  },
  { name: "bad request, JSON form", text: JSON.stringify(BAD_REQUEST), error: BAD_REQUEST },
  {
    name: "unknown model, worker-vllm's proxy form (vLLM's answer quoted in a worker_error)",
    text: `{'message': 'vLLM returned HTTP 404: {"error":{"message":"The model \`x\` does not exist.","type":"NotFoundError","param":"model","code":404}}', 'type': 'worker_error', 'code': None}`,
    error: NOT_FOUND,
  },
] as const;

/** A handler that fails every job with `text` as its error, as the Python SDK would post it. */
function failingWith(text: string) {
  // A generator, as worker-vllm's handler is: it fails before its first item, streamed or not.
  return defineHandler({
    // biome-ignore lint/correctness/useYield: fails before its first item, as worker-vllm does
    async *handler() {
      throw new JobError(text);
    },
  });
}

describe("worker-vllm's errors through the harness's /openai route and the official openai client", () => {
  for (const c of CASES) {
    it(`raises the typed error with its status and message, one job per call: ${c.name}`, async () => {
      await using h = await createHarness({ handler: failingWith(c.text) });
      const ended: string[] = [];
      const stop = h.harness.onJobEvent((event) => {
        if (event.type === "end") ended.push(event.job.error ?? "");
      });
      // The client's default: two retries of a 5xx. A 4xx is not retried, so one job per call.
      const client = new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1` });
      const Expected = c.error.code === 404 ? OpenAI.NotFoundError : OpenAI.BadRequestError;
      for (const stream of [false, true]) {
        const err = await client.chat.completions
          .create({ model: "x", messages: [{ role: "user", content: "hi" }], stream })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(err, `stream: ${stream}`).toBeInstanceOf(Expected);
        const apiError = err as InstanceType<typeof OpenAI.APIError>;
        expect(apiError.status).toBe(c.error.code);
        expect(apiError.error).toEqual(c.error);
        expect(apiError.message).toBe(`${c.error.code} ${c.error.message}`);
        expect(apiError.type).toBe(c.error.type);
        expect(apiError.param).toBe(c.error.param);
      }
      stop();
      expect(ended).toEqual([c.text, c.text]);
    });
  }

  it("answers a streamed request whose job failed first with the HTTP error as JSON, not an event stream", async () => {
    await using h = await createHarness({ handler: failingWith(CASES[0].text) });
    const res = await fetch(`${h.url}/v2/local/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "x", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ error: NOT_FOUND });
  });

  it("answers 500 for a worker error without a client-error status", async () => {
    const text =
      "{'message': 'vLLM server process is not running; worker is unhealthy', 'type': 'worker_error', 'code': None}";
    await using h = await createHarness({ handler: failingWith(text) });
    const client = new OpenAI({ apiKey: h.apiKey, baseURL: `${h.url}/v2/local/openai/v1`, maxRetries: 0 });
    const err = await client.chat.completions.create({ model: "x", messages: [] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect((err as InstanceType<typeof OpenAI.APIError>).error).toEqual({
      message: "vLLM server process is not running; worker is unhealthy",
      type: "worker_error",
      param: null,
      code: null,
    });
  });
});
