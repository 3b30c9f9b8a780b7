import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { JobError } from "../../src/errors.js";
import type { HandlerContext } from "../../src/handler/define-handler.js";
import { checkRelay, MAX_RELAY_BODY_BYTES, relayToSidecar } from "../../src/openai/sidecar-relay.js";
import { SseEventSplitter } from "../../src/openai/sse-events.js";

// Issue 42, items 8 and 15: what the OpenAI relay does with a hostile upstream. The upstream is a
// real HTTP server on loopback; the relay is called as defineOpenAIHandler calls it, with the
// job context's two fields it reads (the sidecar's URL and the job's signal).

const MiB = 1_048_576;

type Answer = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A loopback server answering each request with `answer`; `posts` counts the requests it got. */
async function upstream(answer: Answer): Promise<{ url: string; posts: string[] } & AsyncDisposable> {
  const posts: string[] = [];
  const server: Server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    posts.push(`${req.method} ${req.url} ${body}`);
    answer(req, res, body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    posts,
    [Symbol.asyncDispose]: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The job context's fields the relay reads: the sidecar (at `url`) and the job's signal. */
function contextFor(url: string, signal = new AbortController().signal): HandlerContext<unknown, unknown> {
  const sidecar = { name: "llm", url };
  return { sidecar, sidecars: { llm: sidecar }, signal } as unknown as HandlerContext<unknown, unknown>;
}

const settings = checkRelay(true, "test")!;
const streamed = { model: "m", messages: [{ role: "user", content: "the prompt" }], stream: true };

/** Every item of a streamed relay, or the error it failed with. */
async function relayAll(url: string): Promise<{ items: string[]; error?: unknown }> {
  const items: string[] = [];
  try {
    const out = relayToSidecar(settings, "/v1/chat/completions", streamed, contextFor(url));
    for await (const item of out as AsyncGenerator<string>) items.push(item);
    return { items };
  } catch (error) {
    return { items, error };
  }
}

/** The OpenAI error body a relay error carries as its message. */
function openAIErrorOf(err: unknown): { message: string; type: string; code: string | null } {
  expect(err).toBeInstanceOf(JobError);
  return (
    JSON.parse((err as Error).message) as { error: { message: string; type: string; code: string | null } }
  ).error;
}

describe("the relay's event splitter (issue 42, item 8)", () => {
  it("gives back the same events however the stream is cut into chunks", () => {
    const stream = Buffer.from(
      'data: {"a":"é€😀"}\n\n' +
        "event: x\r\ndata: two\r\n\r\n" +
        "data: three\n\r\n" +
        "\n\n" + // blank events are skipped
        "data: four\r\n\n" +
        "data: five\r\r\ndata: still five\n\n" +
        ": comment only\n\n" +
        "data: the end without a blank line",
    );
    const expected = [
      'data: {"a":"é€😀"}\n\n',
      "event: x\ndata: two\n\n",
      "data: three\n\n",
      "data: four\n\n",
      "data: five\r\ndata: still five\n\n",
      ": comment only\n\n",
      "data: the end without a blank line\n\n",
    ];
    const whole = new SseEventSplitter();
    expect([...whole.push(stream), whole.end()]).toEqual(expected);
    // Every place one cut can fall, and byte by byte.
    for (let cut = 0; cut <= stream.length; cut++) {
      const s = new SseEventSplitter();
      const got = [...s.push(stream.subarray(0, cut)), ...s.push(stream.subarray(cut)), s.end()];
      expect(got, `cut at ${cut}`).toEqual(expected);
    }
    const s = new SseEventSplitter();
    const bytewise: (string | undefined)[] = [];
    for (let i = 0; i < stream.length; i++) bytewise.push(...s.push(stream.subarray(i, i + 1)));
    bytewise.push(s.end());
    expect(bytewise).toEqual(expected);
  });

  it("keeps only the bytes of the event in progress", () => {
    const s = new SseEventSplitter();
    expect(s.push(Buffer.from("data: 1\n\ndata: 2"))).toEqual(["data: 1\n\n"]);
    expect(s.pendingBytes).toBe("data: 2".length);
    expect(s.push(Buffer.from("\n"))).toEqual([]);
    expect(s.push(Buffer.from("\n"))).toEqual(["data: 2\n\n"]);
    expect(s.pendingBytes).toBe(0);
    expect(s.end()).toBeUndefined();
  });

  // The old splitter searched everything not yet sent on each chunk: a long event without its
  // blank line cost work in the square of its length. Counted in bytes searched and copied (the
  // splitter's own tally), not in time: the count does not depend on how loaded the machine is.
  it("splits a 15 MiB event without a blank line with work linear in its length", () => {
    const s = new SseEventSplitter();
    const size = 15 * MiB;
    const chunk = Buffer.alloc(16_384, "x");
    let pushed = 0;
    expect(s.push(Buffer.from("data: "))).toEqual([]);
    pushed += "data: ".length;
    // In 16 KiB chunks, as the relay gets them from a real server, with a line break in some.
    for (let at = 0; at < size; at += chunk.byteLength) {
      expect(s.push(at % (64 * chunk.byteLength) === 0 ? Buffer.from("\n") : chunk)).toEqual([]);
      pushed += at % (64 * chunk.byteLength) === 0 ? 1 : chunk.byteLength;
    }
    const event = s.end();
    expect(event?.length).toBe(pushed + 2);
    const { scanned, copied } = s.work;
    // Linear: each byte searched once, copied into its event once and decoded once.
    expect(scanned, `searched ${scanned} bytes for ${pushed} pushed`).toBeLessThanOrEqual(pushed);
    expect(copied, `copied ${copied} bytes for ${pushed} pushed`).toBeLessThanOrEqual(2 * pushed);
  });

  it("still fails an event over MAX_RELAY_BODY_BYTES without its blank line", async () => {
    await using server = await upstream((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: first\n\n");
      res.end(`data: ${"y".repeat(MAX_RELAY_BODY_BYTES)}`);
    });
    const { items, error } = await relayAll(server.url);
    expect(items).toEqual(["data: first\n\n"]);
    expect((error as Error).message).toBe(
      `sidecar "llm" sent an event over ${MAX_RELAY_BODY_BYTES} bytes without its blank line; the stream was closed`,
    );
  });
});

describe("the relay's checks of the upstream answer (issue 42, item 15)", () => {
  it("fails a streaming request, with a code, when the answer is not text/event-stream", async () => {
    await using server = await upstream((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ choices: [{ message: { content: "not a stream" } }] }));
    });
    const { items, error } = await relayAll(server.url);
    expect(items).toEqual([]);
    expect(openAIErrorOf(error)).toEqual({
      message:
        'sidecar "llm" answered a streaming request with content-type "application/json", not text/event-stream; the relay does not pass it on as a stream',
      type: "server_error",
      param: null,
      code: "upstream_not_event_stream",
    });
  });

  it("streams an answer whose content-type has parameters and other letter case", async () => {
    await using server = await upstream((_req, res) => {
      res.writeHead(200, { "content-type": "Text/Event-Stream; charset=utf-8" });
      res.end("data: ok\n\n");
    });
    expect(await relayAll(server.url)).toEqual({ items: ["data: ok\n\n"] });
  });

  it("does not follow a 307: the prompt is sent once, to the sidecar only", async () => {
    await using elsewhere = await upstream((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end("data: followed\n\n");
    });
    await using server = await upstream((_req, res) => {
      res.writeHead(307, { location: `${elsewhere.url}/collect` });
      res.end();
    });
    const { items, error } = await relayAll(server.url);
    expect(items).toEqual([]);
    expect(openAIErrorOf(error)).toEqual({
      message: `sidecar "llm" answered 307 (a redirect to ${elsewhere.url}/collect); the relay does not follow redirects, so the request was not sent again`,
      type: "server_error",
      param: null,
      code: "upstream_redirect",
    });
    expect(server.posts).toHaveLength(1);
    expect(server.posts[0]).toContain("the prompt");
    expect(elsewhere.posts).toEqual([]);
  });

  it("does not follow a 308 on a request that does not stream either", async () => {
    await using elsewhere = await upstream((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    await using server = await upstream((_req, res) => {
      res.writeHead(308, { location: `${elsewhere.url}/v1/chat/completions` });
      res.end();
    });
    const error = await (
      relayToSidecar(
        settings,
        "/v1/chat/completions",
        { ...streamed, stream: false },
        contextFor(server.url),
      ) as Promise<unknown>
    ).catch((e: unknown) => e);
    expect(openAIErrorOf(error).code).toBe("upstream_redirect");
    expect(elsewhere.posts).toEqual([]);
  });
});
