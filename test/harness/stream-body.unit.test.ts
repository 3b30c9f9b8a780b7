import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseJson } from "../../src/harness/http/http-util.js";
import { parseStreamBody } from "../../src/harness/routes/stream-body.js";

// The job-stream body parser's fast path for large plain slices must answer exactly as JSON.parse:
// the same value (same keys in the same order) for a valid body, the same message for a bad one.

/** A long plain slice: long enough for the fast path (64 Ki characters and more). */
const LONG = "x".repeat(70_000);

/** What may sit inside the slice: plain text, or one thing JSON escapes or forbids raw. */
const inside = fc.constantFrom(
  "",
  "abc",
  "é😀",
  '\\"',
  "\\n",
  "\\u0041",
  "\\",
  "\n",
  "\u0000",
  "\u001f",
  "\t",
);

/** What may follow the slice's closing quote: valid and broken ends of the object. */
const after = fc.constantFrom(
  "}",
  "} ",
  "}\n",
  ',"metrics":{"streamIndex":0,"part":1,"parts":2,"encoding":"string","bytes":140004}}',
  ',"metrics":{"model":"llamá"},"extra":[1,2,{"a":null}]}',
  ',"output":"second wins"}',
  ',"output":{"nested":true},"metrics":{}}',
  ',"__proto__":{"polluted":true}}',
  ' ,"metrics":{}}',
  " }",
  ",}",
  ", }",
  ',"metrics":{},}',
  ',"metrics":{}',
  '"b":1}',
  '"}',
  "}}",
  "}x",
  ',"metrics":{}}]',
  "",
  ":1}",
  ',,"a":1}',
);

/** Parses as JSON.parse would, or returns its message. */
function reference(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  return parseJson(text);
}

/** The value's own keys in order, all the way down: toEqual alone does not compare key order. */
function keyOrder(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(keyOrder);
  return Object.entries(value).map(([key, v]) => [key, keyOrder(v)]);
}

describe("parseStreamBody", () => {
  it("answers exactly as JSON.parse for long slices with any ending, valid or not", () => {
    fc.assert(
      fc.property(inside, fc.nat(LONG.length), after, (odd, at, tail) => {
        const text = `{"output":"${LONG.slice(0, at)}${odd}${LONG.slice(at)}"${tail}`;
        const fast = parseStreamBody(text);
        const slow = reference(text);
        expect(fast.ok).toBe(slow.ok);
        if (fast.ok && slow.ok) {
          expect(fast.value).toEqual(slow.value);
          expect(keyOrder(fast.value)).toEqual(keyOrder(slow.value));
          // An own "__proto__" member stays data, as JSON.parse leaves it.
          expect(Object.getPrototypeOf(fast.value)).toBe(Object.prototype);
        } else {
          expect(fast).toEqual(slow);
        }
      }),
      { numRuns: 400 },
    );
  });

  it("takes a plain 1 MiB slice as its exact text", () => {
    const slice = "plain text ".repeat(95_000);
    const body = `{"output":"${slice}","metrics":{"part":3,"parts":9}}`;
    expect(parseStreamBody(body)).toEqual({
      ok: true,
      value: { output: slice, metrics: { part: 3, parts: 9 } },
    });
  });

  it("refuses a raw control character in a long slice with JSON.parse's message", () => {
    const body = `{"output":"${LONG}\u0001${LONG}"}`;
    const answer = parseStreamBody(body);
    expect(answer.ok).toBe(false);
    expect(answer).toEqual(reference(body));
  });
});
