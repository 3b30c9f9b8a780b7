import { describe, expect, it } from "vitest";
import { z } from "zod";
import { inputJsonSchema } from "../../src/harness/dashboard/index.js";
import { openAIReplyOf, openAIRouteOf } from "../../src/harness/dashboard/static/openai-reply.js";
import { exampleOf, validate } from "../../src/harness/dashboard/static/schema-form.js";

/** The page's own modules in plain Node (they use no DOM): the cases the browser tests do not reach. */
describe("the dashboard page's schema form", () => {
  const zodSchema = z.object({
    mode: z.enum(["fast", "slow"]),
    size: z.number().int().min(64).max(1024),
    tags: z.array(z.string()).min(1),
    seed: z.number().nullable(),
    style: z.object({ name: z.string().regex(/^[a-z]+$/) }).optional(),
    extra: z.union([z.string(), z.number()]).default(1),
  });
  const schema = inputJsonSchema(zodSchema).inputSchema;

  it("makes an example the schema accepts from enums, bounds, arrays, nullables and unions", () => {
    const example = exampleOf(schema);
    expect(example).toEqual({ mode: "fast", size: 64, tags: [""], seed: 0, extra: 1 });
    expect(validate(schema, example)).toEqual([]);
    // zod itself takes it.
    expect(zodSchema.safeParse(example).success).toBe(true);
  });

  it("names each problem with its path", () => {
    expect(
      validate(schema, { mode: "warp", size: 2048.5, tags: [], seed: "x", style: { name: "A1" }, extra: [] }),
    ).toEqual([
      { path: "input.mode", message: 'must be one of "fast", "slow"' },
      { path: "input.size", message: "expected integer, got number" },
      { path: "input.tags", message: "needs at least 1 items" },
      { path: "input.seed", message: "expected number or null, got string" },
      { path: "input.style.name", message: "must match /^[a-z]+$/" },
      { path: "input.extra", message: "expected string or number, got array" },
    ]);
    expect(validate(schema, "text")).toEqual([{ path: "input", message: "expected object, got string" }]);
    // A union of shapes (anyOf) fits when one of them does.
    const shapes = inputJsonSchema(
      z.union([z.object({ a: z.string() }), z.object({ b: z.number() })]),
    ).inputSchema;
    expect(validate(shapes, { b: 1 })).toEqual([]);
    expect(validate(shapes, { c: 1 })).toEqual([
      { path: "input", message: "matches none of the 2 allowed shapes" },
    ]);
    // No schema: anything goes.
    expect(validate({}, { any: ["thing"] })).toEqual([]);
  });
});

describe("the dashboard page's OpenAI reply", () => {
  const frame = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;

  it("joins streamed tool calls by index and keeps the finish reason and usage", () => {
    const text = [
      frame({ model: "m1", choices: [{ index: 0, delta: { role: "assistant", content: "" } }] }),
      frame({
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [{ index: 0, id: "call_1", function: { name: "get_", arguments: '{"ci' } }],
            },
          },
        ],
      }),
      frame({
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: 0, function: { name: "weather", arguments: 'ty":"Oslo"}' } }] },
          },
        ],
      }),
      frame({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }),
      frame({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } }),
      "data: [DONE]\n\n",
    ].join("");
    // A frame cut short (a slice still missing) does not spoil the rest.
    expect(openAIReplyOf(`${text}data: {"choi`, undefined)).toMatchObject({
      text: "",
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      finishReason: "tool_calls",
      usage: { total_tokens: 13 },
      model: "m1",
    });
  });

  it("reads a request that did not stream from its output, and tells OpenAI jobs from others", () => {
    const output = {
      model: "m1",
      choices: [{ index: 0, message: { role: "assistant", content: "hi there" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    };
    expect(openAIReplyOf("", output)).toMatchObject({ text: "hi there", finishReason: "stop" });
    expect(openAIReplyOf("", [])).toBeNull();
    expect(openAIRouteOf({ request: { input: { openai_route: "/v1/completions" } } })).toBe(
      "/v1/completions",
    );
    expect(openAIRouteOf({ request: { input: { prompt: "x" } } })).toBeNull();
  });
});
