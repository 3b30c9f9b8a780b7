import { MessageChannel, type MessagePort } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { FrontExchange } from "../../src/worker/lb/front-exchange.js";
import type { ToFrontRequests } from "../../src/worker/lb/front-messages.js";

/**
 * The main thread's side of a request the front thread passed on over a MessagePort
 * (src/worker/lb/front-exchange.ts), against a real MessageChannel whose other end stands in for
 * the front thread (the thread itself and its sockets are the subject of test/lb/lb-worker.test.ts):
 * what it posts for a whole answer and a streamed one, the window that makes a stream wait for the
 * client, bodies transferred rather than copied, and a client's hang-up.
 */

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

/** An exchange for request `id`, and the messages the stand-in front thread received. */
function exchange(id = 1): {
  ex: FrontExchange;
  front: MessagePort;
  got: ToFrontRequests[];
  forgotten: () => boolean;
} {
  const channel = new MessageChannel();
  channels.push(channel);
  const got: ToFrontRequests[] = [];
  channel.port2.on("message", (m: ToFrontRequests) => got.push(m));
  let forgotten = false;
  const ex = new FrontExchange(
    channel.port1,
    { id, method: "POST", url: "/run?x=1", headers: { accept: "text/event-stream" }, body: undefined },
    () => {
      forgotten = true;
    },
  );
  return { ex, front: channel.port2, got, forgotten: () => forgotten };
}

/** Lets the channel deliver what was posted (a few turns of the event loop). */
async function tick(): Promise<void> {
  for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe("FrontExchange", () => {
  it("posts a whole answer once, with the headers set before it, and then is finished", async () => {
    const { ex, got, forgotten } = exchange(7);
    const finished: number[] = [];
    ex.onFinish(() => finished.push(ex.statusCode));
    ex.setHeader("x-request-id", "lb-abc");
    ex.sendWhole(201, { "content-type": "application/json" }, '{"ok":true}');
    ex.sendWhole(500, {}, "never");
    await tick();
    expect(got).toEqual([
      {
        type: "whole",
        id: 7,
        status: 201,
        headers: { "content-type": "application/json", "x-request-id": "lb-abc" },
        body: '{"ok":true}',
      },
    ]);
    expect(finished).toEqual([201]);
    expect(forgotten()).toBe(true);
    expect(ex.headersSent && ex.finished).toBe(true);
  });

  it("transfers a long answer's bytes: the text arrives as the bytes it encodes", async () => {
    const { ex, got } = exchange();
    const text = `"${"é".repeat(70_000)}"`;
    ex.sendWhole(200, {}, text);
    await tick();
    const body = (got[0] as { body: unknown }).body;
    expect(body).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(body as Uint8Array).toString("utf8")).toBe(text);
  });

  it("streams chunks under a window: past 64 Ki characters unread it waits for the front thread's ack", async () => {
    const { ex, got } = exchange(3);
    ex.writeHead(200, { "content-type": "text/event-stream" });
    const piece = "x".repeat(16 * 1024);
    expect(ex.write(piece)).toBe(true);
    expect(ex.write(piece)).toBe(true);
    expect(ex.write(piece)).toBe(true);
    // The fourth fills the window: it asks for an ack and the writer must wait.
    expect(ex.write(piece)).toBe(false);
    let drained = false;
    const waiting = ex.drained().then(() => {
      drained = true;
    });
    await tick();
    expect(got.map((m) => (m.type === "chunk" ? `chunk${m.ack ? "+ack" : ""}` : m.type))).toEqual([
      "head",
      "chunk",
      "chunk",
      "chunk",
      "chunk+ack",
    ]);
    expect(drained).toBe(false);
    // The front thread's ack, as the request server hands it to its exchange.
    ex.acked();
    await waiting;
    expect(drained).toBe(true);
    expect(ex.write("y")).toBe(true);
    ex.end();
    ex.write("after the end");
    await tick();
    expect(got.at(-1)).toEqual({ type: "end", id: 3 });
    expect(got.filter((m) => m.type === "chunk")).toHaveLength(5);
  });

  it("on a client's hang-up runs its close listeners once, releases a waiting writer, and posts nothing more", async () => {
    const { ex, got, forgotten } = exchange();
    const closes: string[] = [];
    ex.onClose(() => closes.push("closed"));
    ex.writeHead(200, {});
    expect(ex.write("z".repeat(70_000))).toBe(false);
    const waiting = ex.drained();
    ex.aborted();
    ex.aborted();
    await waiting;
    ex.end();
    ex.destroy();
    await tick();
    expect(closes).toEqual(["closed"]);
    expect(forgotten()).toBe(true);
    expect(got.map((m) => m.type)).toEqual(["head", "chunk"]);
  });

  it("cuts an answer that began, and never one that is complete", async () => {
    const cut = exchange(5);
    cut.ex.writeHead(200, {});
    cut.ex.destroy();
    const done = exchange(6);
    const closes: string[] = [];
    done.ex.onClose(() => closes.push("closed"));
    done.ex.sendWhole(200, {}, "{}");
    done.ex.destroy();
    done.ex.aborted();
    await tick();
    expect(cut.got.map((m) => m.type)).toEqual(["head", "cut"]);
    expect(cut.ex.destroyed).toBe(true);
    expect(done.got.map((m) => m.type)).toEqual(["whole"]);
    expect(closes).toEqual([]);
  });
});
