import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { call, post, startLbWorker } from "../support/lb-support.js";
import { waitForAsync } from "../support/wait-for.js";

/**
 * The front thread reads a request's body whole before it posts the request to the main thread
 * (src/worker/lb/front-source.ts): clients that go away in the middle of their bodies never reach
 * the handler, and the worker (its front thread, its health) serves on.
 */
describe("clients that hang up in the middle of their bodies", () => {
  it("never reach the handler, and the worker serves on", async () => {
    let calls = 0;
    const definition = defineHandler({
      handler: () => {
        calls += 1;
        return "served";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const port = Number(new URL(lb.url).port);
    for (let i = 0; i < 5; i += 1) {
      await new Promise<void>((resolve) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(
            'POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"input":',
          );
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 50);
        });
        socket.on("error", () => resolve());
      });
    }
    expect((await call(`${lb.url}/ping`)).status).toBe(200);
    const answer = await post(`${lb.url}/run`, { input: {} });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).output).toBe("served");
    expect(calls).toBe(1);
    expect(lb.lines.filter((l) => l["message"] === "request answered")).toHaveLength(1);
  });
});
