import { describe, expect, it } from "vitest";
import { openAIErrorOfText } from "../../src/harness/openai/error-body.js";
import { parsePythonLiteral } from "../../src/harness/openai/python-literal.js";

// The texts below are what CPython 3 prints for str() of the dicts named beside them.
describe("parsePythonLiteral", () => {
  it("reads str() of a dict of plain values: quotes of both kinds, escapes, None/True/False, tuples", () => {
    // str({'a': [1, 2.5, -3e-05, (1,), True, False, None, 'it\'s "q"', '\x00\té\u2028😀']})
    const text = `{'a': [1, 2.5, -3e-05, (1,), True, False, None, 'it\\'s "q"', '\\x00\\té\\u2028😀']}`;
    expect(parsePythonLiteral(text)).toEqual({
      a: [1, 2.5, -3e-5, [1], true, false, null, `it's "q"`, "\u0000\té\u2028😀"],
    });
    // A message holding single quotes is printed in double quotes; newlines are escaped.
    expect(parsePythonLiteral(`{"k": "x='y'\\n\\U0001f600\\101", 'e': {}, 'l': [], 't': ()}`)).toEqual({
      k: "x='y'\n😀A",
      e: {},
      l: [],
      t: [],
    });
  });

  it("keeps a __proto__ key as an ordinary key", () => {
    const value = parsePythonLiteral("{'__proto__': {'polluted': True}}") as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });

  it("answers undefined for anything outside the literal subset, without evaluating it", () => {
    for (const text of [
      "",
      "{'a': 1",
      "{'a' 1}",
      "{1: 'a'}",
      "{'a': foo()}",
      "{'a': __import__('os')}",
      "{'a': 'unterminated}",
      "{'a': 'new\nline'}",
      "{'a': '\\x4'}",
      "{'a': 1} trailing",
      "{'a': b'bytes'}",
      `${"[".repeat(10_000)}${"]".repeat(10_000)}`,
    ]) {
      expect(parsePythonLiteral(text), text.slice(0, 40)).toBeUndefined();
    }
  });
});

describe("openAIErrorOfText", () => {
  it("reads worker-vllm's errors as the Python SDK posts them, and their JSON forms", () => {
    const notFound = {
      error: { message: "The model `x` does not exist.", type: "NotFoundError", param: "model", code: 404 },
    };
    for (const text of [
      "{'message': 'The model `x` does not exist.', 'type': 'NotFoundError', 'param': 'model', 'code': 404}",
      JSON.stringify(notFound.error),
      JSON.stringify(notFound),
      `{'error': {'message': 'The model \`x\` does not exist.', 'type': 'NotFoundError', 'param': 'model', 'code': 404}}`,
      // worker-vllm's proxy: vLLM's own answer quoted in a worker_error without a status.
      `{'message': 'vLLM returned HTTP 404: {"error":{"message":"The model \`x\` does not exist.","type":"NotFoundError","param":"model","code":404}}', 'type': 'worker_error', 'code': None}`,
    ]) {
      expect(openAIErrorOfText(text), text).toEqual(notFound);
    }
  });

  it("leaves texts that are not OpenAI errors to the caller", () => {
    for (const text of [
      undefined,
      "the GPU fell over",
      "{'message': 'no type and no code'}",
      JSON.stringify({ error_type: "ValueError", error_message: "x", error_traceback: "" }),
      "{'error': 'a string, not an error body'}",
    ]) {
      expect(openAIErrorOfText(text), String(text)).toBeUndefined();
    }
  });

  it("keeps a worker error without a client-error status as it is (a 500 for the client)", () => {
    const text = "{'message': 'vLLM server process is not running', 'type': 'worker_error', 'code': None}";
    expect(openAIErrorOfText(text)).toEqual({
      error: { message: "vLLM server process is not running", type: "worker_error", param: null, code: null },
    });
  });
});
