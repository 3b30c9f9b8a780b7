import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { testHarness, workerFor } from "../support/workers.js";

/**
 * A burst of /runsync requests against a worker with many slots: every job's posts, waits and
 * long polls are bounded by the worker's long-lived signals, and none of them may pile listeners
 * on one signal (Node prints MaxListenersExceededWarning past 10 on an EventTarget). On loopback:
 * each request's listeners come from the socket transport a deployed worker uses (an in-memory
 * worker's path adds fewer), so the socket is part of the subject here.
 */
const BURST = 40;

describe("a /runsync burst", () => {
  it("emits no MaxListenersExceededWarning while a worker with 32 slots serves 40 requests", async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => {
      if (warning.name === "MaxListenersExceededWarning") warnings.push(warning);
    };
    process.on("warning", onWarning);
    try {
      await using h = await testHarness();
      await using _w = await workerFor(
        h,
        defineHandler({
          concurrency: 32,
          async handler({ input, signal, progress }) {
            progress({ step: 1 });
            await new Promise((resolve) => setTimeout(resolve, 50));
            signal.throwIfAborted();
            return { echo: input };
          },
        }),
      );
      // Every job's first post is refused: 40 jobs sit in back-off on the worker's give-up signal at once.
      h.injectFault("job-done", { status: 503 }, BURST);
      const agent = new Agent({ connections: BURST });
      try {
        const answers = await Promise.all(
          Array.from({ length: BURST }, async (_, n) => {
            const res = await request(`${h.url}/v2/local/runsync`, {
              method: "POST",
              dispatcher: agent,
              headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
              body: JSON.stringify({ input: { n } }),
            });
            return {
              status: res.statusCode,
              body: (await res.body.json()) as { status: string; output: unknown },
            };
          }),
        );
        expect(answers.map((a) => [a.status, a.body.status, a.body.output])).toEqual(
          Array.from({ length: BURST }, (_, n) => [200, "COMPLETED", { echo: { n } }]),
        );
      } finally {
        await agent.close();
      }
      // A warning is emitted on the next tick after the listener that crossed the limit.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message)).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});
