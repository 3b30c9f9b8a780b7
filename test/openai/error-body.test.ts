import { describe, expect, it } from "vitest";
import { statusOf } from "../../src/harness/openai/error-body.js";

describe("the status of an OpenAI error body", () => {
  it("answers 500 for a type named like an Object.prototype member, never that member", () => {
    // Read as a table lookup with inherited keys, "constructor" gave a function as the status and
    // the relay's writeHead threw inside an event listener: the client was never answered.
    for (const type of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      expect(statusOf({ error: { message: "x", type, param: null, code: null } })).toBe(500);
    }
    expect(statusOf({ error: { message: "x", type: "not_found_error", param: null, code: null } })).toBe(404);
    expect(statusOf({ error: { message: "x", type: "whatever", param: null, code: 400 } })).toBe(400);
  });
});
