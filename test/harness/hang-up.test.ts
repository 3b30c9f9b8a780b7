import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { hangUpSignal } from "../../src/harness/http/http-util.js";
import { waitFor } from "../support/wait-for.js";

// The harness's hang-up signal (held job-takes, job-stop polls, /runsync and /stream waits): a
// client's FIN is its hang-up, as node:http itself takes it, not only the later 'close' of the
// response. A held take that outlived its worker's FIN took the next job into a dead connection.

let server: Server | undefined;
let client: Socket | undefined;
afterEach(async () => {
  client?.destroy();
  server?.closeAllConnections();
  if (server !== undefined) await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<number> {
  server = createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as AddressInfo).port;
}

describe("hangUpSignal", () => {
  it("aborts at the client's FIN, before the response closes", async () => {
    let abortedAtEnd: boolean | undefined;
    let arrived = false;
    const port = await listen((req, res) => {
      arrived = true;
      const signal = hangUpSignal(res);
      // Registered after hangUpSignal's own listener: runs in the same 'end', after it.
      req.socket.once("end", () => {
        abortedAtEnd = signal.aborted;
      });
    });
    client = connect(port, "127.0.0.1");
    client.write("GET /held HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await waitFor("the request to arrive", () => arrived);
    client.end();
    expect(
      await waitFor("the server to see the FIN", () => abortedAtEnd !== undefined && { abortedAtEnd }),
    ).toEqual({
      abortedAtEnd: true,
    });
  });

  it("does not abort for an answer sent whole, and leaves no listener on a kept-alive connection", async () => {
    const signals: AbortSignal[] = [];
    const endListeners: number[] = [];
    const port = await listen((req, res) => {
      signals.push(hangUpSignal(res));
      endListeners.push(req.socket.listenerCount("end"));
      res.end("ok");
    });
    client = connect(port, "127.0.0.1");
    let text = "";
    client.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
    });
    for (let i = 1; i <= 20; i++) {
      client.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      await waitFor(`answer ${i}`, () => text.split("HTTP/1.1 200").length - 1 === i);
    }
    expect(signals).toHaveLength(20);
    expect(signals.some((s) => s.aborted)).toBe(false);
    expect(new Set(endListeners).size).toBe(1);
  });
});
