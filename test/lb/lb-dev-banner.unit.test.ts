import { describe, expect, it } from "vitest";
import { tryLines } from "../../src/cli/dev-banner.js";

/**
 * `runlet dev --mode lb` prints how to call the handler on its load-balancing route: the worker's
 * own routes (docs/load-balancing.md), not the queue's `/run` + `/stream/<id>` or `/openai/v1`.
 */

const endpoint = "http://127.0.0.1:8787/lb/local";
const apiKey = "rl_key_0123456789";
const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
const auth = `-H 'Authorization: Bearer ${apiKey}' -H 'Content-Type: application/json'`;

describe("runlet dev's try-lines on a load-balancing endpoint", () => {
  it("a plain handler: a /runsync curl on the LB route", () => {
    const lines = tryLines({
      endpoint,
      apiKey,
      sample: undefined,
      mode: "lb",
      info: { inputSchema: schema, streaming: false, openai: false },
    });
    expect(lines).toEqual([
      `  try       curl -s -X POST ${endpoint}/runsync ${auth} -d '{"input":{"text":""}}'`,
    ]);
  });

  it("a generator: one POST /stream answered with server-sent events, not /run then /stream/<id>", () => {
    const lines = tryLines({
      endpoint,
      apiKey,
      sample: { input: { text: "hi" } },
      mode: "lb",
      info: { inputSchema: schema, streaming: true, openai: false },
    });
    expect(lines[0]).toBe(
      `  try       curl -sN -X POST ${endpoint}/stream ${auth} -d '{"input":{"text":"hi"}}'`,
    );
    expect(lines.join("\n")).not.toContain("/run ");
    expect(lines.join("\n")).toContain("server-sent events");
  });

  it("an OpenAI handler: the /v1 base URL on the LB route, not the queue's /openai/v1", () => {
    const lines = tryLines({
      endpoint,
      apiKey,
      sample: undefined,
      mode: "lb",
      info: { inputSchema: {}, streaming: true, openai: true, models: ["echo-1"] },
    });
    expect(lines[0]).toBe(
      `  openai    ${endpoint}/v1  (an OpenAI client's base URL; its API key is the key above)`,
    );
    expect(lines[1]).toContain(`curl -s ${endpoint}/v1/chat/completions `);
    expect(lines.join("\n")).not.toContain("/openai/v1");
  });

  it("the queue endpoint keeps its routes", () => {
    const queue = "http://127.0.0.1:8787/v2/local";
    const info = { inputSchema: {}, streaming: true, openai: true, models: ["echo-1"] };
    expect(tryLines({ endpoint: queue, apiKey, sample: undefined, info })[0]).toContain(`${queue}/openai/v1`);
    const stream = tryLines({ endpoint: queue, apiKey, sample: undefined, info: { ...info, openai: false } });
    expect(stream[1]).toContain(`${queue}/stream/$id`);
  });
});
