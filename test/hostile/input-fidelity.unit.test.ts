import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { send } from "../support/raw-http.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

// Issue 32, item 7: the platform passes `input` through as sent. An own `__proto__` key reached the
// worker without it, and 1e400 silently became null. Now the input arrives unchanged, and a number
// no JSON reader can hold is refused with a 400 naming the field.

const reports = defineHandler({
  handler: ({ input }) => ({ keys: Object.keys(input as object), json: JSON.stringify(input) }),
});

describe("the harness passes inputs through unchanged (issue 32)", () => {
  it("delivers an input with an own __proto__ key with it", async () => {
    await using h = memoryHarness();
    await using _w = await workerFor(h, reports);
    const res = await send(h.url, {
      method: "POST",
      path: "/v2/local/run",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      connect: () => h.connect(),
      body: '{"input":{"__proto__":{"polluted":true},"a":1}}',
    });
    expect(res.status).toBe(200);
    const { id } = JSON.parse(res.text) as { id: string };
    const job = await waitFor("the job to end", () => {
      const j = h.job(id);
      return j?.status === "COMPLETED" || j?.status === "FAILED" ? j : undefined;
    });
    expect(job.output).toEqual({ keys: ["__proto__", "a"], json: '{"__proto__":{"polluted":true},"a":1}' });
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it("refuses a number beyond a double's range with a 400 naming the field, rather than sending null", async () => {
    await using h = memoryHarness();
    for (const [body, field] of [
      ['{"input":{"a":{"b":[1,1e400]}}}', "input.a.b[1]"],
      ['{"input":{"x":-1E+400}}', "input.x"],
      [`{"input":{"n":${"9".repeat(400)}}}`, "input.n"],
      ['{"input":{},"extra":1e999}', "extra"],
    ] as const) {
      for (const route of ["run", "runsync"]) {
        const res = await send(h.url, {
          method: "POST",
          path: `/v2/local/${route}`,
          headers: { authorization: h.apiKey, "content-type": "application/json" },
          connect: () => h.connect(),
          body,
        });
        expect({ body, status: res.status }).toEqual({ body, status: 400 });
        expect(res.text).toContain(`${field}: a number beyond the range of a 64-bit float`);
      }
    }
    // Numbers that fit, exponents and long digits in strings included, go through.
    const fine = await send(h.url, {
      method: "POST",
      path: "/v2/local/run",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      connect: () => h.connect(),
      body: '{"input":{"big":1e308,"small":1e-400,"text":"1e400"}}',
    });
    expect(fine.status).toBe(200);
  });
});
