import { describe, expect, it } from "vitest";
import { endHeaders, jobEndError, NO_RETRY, statusOf } from "../../src/harness/openai/error-body.js";

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

describe("the answer for a job's end", () => {
  it("tells the openai clients not to run a finished job again, except for a worker's 408, 409 or 429", () => {
    expect(jobEndError("CANCELLED", undefined)).toMatchObject({
      status: 499,
      headers: { "x-should-retry": "false" },
      body: { error: { code: "job_cancelled" } },
    });
    expect(jobEndError("TIMED_OUT", undefined)).toMatchObject({ status: 504, headers: NO_RETRY });
    expect(jobEndError("FAILED", "boom")).toMatchObject({ status: 500, headers: NO_RETRY });
    const own = (code: number) =>
      JSON.stringify({ error: { message: "m", type: "invalid_request_error", param: null, code } });
    expect(jobEndError("FAILED", own(400))).toMatchObject({ status: 400, headers: NO_RETRY });
    for (const status of [408, 409, 429]) {
      expect(jobEndError("FAILED", own(status))).toEqual(expect.objectContaining({ status, headers: {} }));
    }
    expect(endHeaders(503)).toEqual(NO_RETRY);
  });

  it("answers model_not_found with 404 whatever its type, as OpenAI does", () => {
    expect(
      statusOf({
        error: { message: "x", type: "invalid_request_error", param: "model", code: "model_not_found" },
      }),
    ).toBe(404);
    // An own-key lookup: a code named like an Object.prototype member is no status.
    expect(
      statusOf({ error: { message: "x", type: "invalid_request_error", param: null, code: "constructor" } }),
    ).toBe(400);
  });
});
