import { describe, expect, it } from "vitest";
import { JobError } from "../../src/errors.js";
import { openAIJobError } from "../../src/openai/errors.js";
import {
  chatRequestOf,
  responsesErrorOf,
  responsesParamOf,
  responsesRequestSchema,
} from "../../src/openai/responses.js";

/** The Responses API's errors name its own parameters, not those of the chat request it becomes. */

const request = (body: Record<string, unknown>) =>
  responsesRequestSchema.parse({ model: "m", input: "hi", ...body });

describe("Responses parameters in errors", () => {
  it("maps messages, response_format and max_tokens back, input items shifted past instructions", () => {
    const items = request({ input: [{ role: "user", content: "a" }], instructions: "be brief" });
    expect(responsesParamOf("messages", items)).toBe("input");
    expect(responsesParamOf("messages[0].content", items)).toBe("instructions");
    expect(responsesParamOf("messages[1].content[2].text", items)).toBe("input[0].content[2].text");
    expect(responsesParamOf("messages[1]", request({ input: [{ role: "user", content: "a" }] }))).toBe(
      "input[1]",
    );
    expect(responsesParamOf("messages[0].content", request({}))).toBe("input");
    expect(responsesParamOf("response_format.json_schema.name", items)).toBe("text.format.name");
    expect(responsesParamOf("response_format.type", items)).toBe("text.format.type");
    expect(responsesParamOf("response_format", items)).toBe("text.format");
    expect(responsesParamOf("max_tokens", items)).toBe("max_output_tokens");
    expect(responsesParamOf("temperature", items)).toBe("temperature");
  });

  it("rewrites the error's param and its message; leaves other errors as they are", () => {
    const err = openAIJobError(
      "Invalid value for 'messages': expected at most 2048 items.",
      "invalid_request_error",
      {
        code: "invalid_value",
        param: "messages",
      },
    );
    const mapped = responsesErrorOf(err, request({})) as JobError;
    expect(JSON.parse(mapped.message)).toEqual({
      error: {
        message: "Invalid value for 'input': expected at most 2048 items.",
        type: "invalid_request_error",
        param: "input",
        code: "invalid_value",
      },
    });
    const plain = new JobError("not JSON");
    expect(responsesErrorOf(plain, request({}))).toBe(plain);
    const other = new Error("x");
    expect(responsesErrorOf(other, request({}))).toBe(other);
  });

  it("refuses an input item of another type naming its type, and a message without role naming the role", () => {
    const call = request({ input: [{ type: "function_call_output", call_id: "c", output: "x" }] });
    expect(() => chatRequestOf(call)).toThrow(
      /input items of type \\"function_call_output\\" are not served/,
    );
    const noRole = request({ input: [{ content: "x" }] });
    expect(() => chatRequestOf(noRole)).toThrow(/Missing required parameter: 'input\[0\]\.role'/);
  });
});
