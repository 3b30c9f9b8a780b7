import { request } from "node:http";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { call, startLbWorker } from "../support/lb-support.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { waitForAsync } from "../support/wait-for.js";

const spinFixture = fileURLToPath(new URL("./fixtures/stream-spin-thread.ts", import.meta.url));

/**
 * A stream cut off by force (an isolation thread terminated at shutdown) over real HTTP: its
 * server-sent events end with an `error` event, never like a complete stream.
 */
describe("a stream cut off by force", () => {
  it(
    "ends its server-sent events with an error event",
    async () => {
      const { default: definition } = await import("./fixtures/stream-spin-thread.js");
      const lb = await startLbWorker(definition, { handlerModule: spinFixture, shutdownGraceMs: 100 });
      await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200, THREAD_START_MS);
      let closing: Promise<void> | undefined;
      const body = await new Promise<string>((resolve, reject) => {
        const req = request(
          `${lb.url}/stream`,
          { method: "POST", agent: false, headers: { "content-type": "application/json" } },
          (res) => {
            let text = "";
            res.on("data", (chunk: Buffer) => {
              text += chunk.toString("utf8");
              // The first item is out: the worker shuts down, its thread spinning.
              if (closing === undefined) closing = lb.worker.close();
            });
            res.on("end", () => resolve(text));
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(JSON.stringify({ input: {} }));
      });
      await closing;
      expect(body).toContain('data: {"token":"first"}');
      expect(body).not.toContain("event: done");
      expect(body).toMatch(/event: error\ndata: \{[^\n]*"status":"FAILED"[^\n]*stopped by force/);
    },
    THREAD_TEST_MS,
  );
});
