import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { call, startLbWorker } from "../support/lb-support.js";
import { waitForAsync } from "../support/wait-for.js";

/**
 * A streamed answer crosses from the main thread to the front thread as messages
 * (src/worker/lb/front-exchange.ts): over real HTTP, a client that stops reading stops the
 * handler's items (back-pressure through the MessagePort's window), and one that reads on gets
 * every item, bytes as written, and the end event.
 */
describe("a streamed answer under back-pressure", () => {
  it("makes the handler's next item only as the client reads, and delivers every item", async () => {
    const items = 200;
    const size = 64 * 1024;
    let made = 0;
    const definition = defineHandler({
      async *handler() {
        for (let i = 0; i < items; i += 1) {
          made += 1;
          yield { i, pad: String.fromCharCode(97 + (i % 26)).repeat(size) };
        }
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const { paused, text } = await new Promise<{ paused: number; text: string }>((resolve, reject) => {
      const req = request(
        `${lb.url}/stream`,
        { method: "POST", agent: false, headers: { "content-type": "application/json" } },
        (res) => {
          res.pause();
          // The client reads nothing for a while: the handler must stop well short of its 12.5 MiB.
          setTimeout(() => {
            const pausedAt = made;
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () => resolve({ paused: pausedAt, text: Buffer.concat(chunks).toString("utf8") }));
            res.on("error", reject);
            res.resume();
          }, 600);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ input: {} }));
    });
    expect(paused).toBeLessThan(items);
    const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events).toHaveLength(items);
    for (const [i, event] of events.entries()) {
      const item = JSON.parse(event.slice("data: ".length)) as { i: number; pad: string };
      expect(item.i).toBe(i);
      expect(item.pad).toBe(String.fromCharCode(97 + (i % 26)).repeat(size));
    }
    expect(text).toMatch(/event: done\ndata: \{[^\n]*"status":"COMPLETED"/);
  });
});
