import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineBatchHandler, defineHandler } from "../../src/handler/index.js";
import { type Answer, call, gate, post, startLbWorker } from "../support/lb-support.js";
import { waitForAsync } from "../support/wait-for.js";

/**
 * A request's job on the worker's job path in load-balancing mode (src/worker/lb/job-run.ts), over
 * real HTTP on loopback: a batch member that ends before its batch starts (bad input, a hang-up
 * while it waits), one let go from a running batch, how many requests a batch handler takes, and
 * a plain in-process handler that ignores its signal (a runaway).
 */

/** The answer, or "no answer" once `ms` passed (a request that hangs fails the test, not the run). */
function within(ms: number, answer: Promise<Answer>): Promise<Answer | "no answer"> {
  return Promise.race([answer, sleep(ms).then(() => "no answer" as const)]);
}

/** POSTs `body` and hangs up after `afterMs`, before the answer. */
function hangUp(url: string, body: unknown, afterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json" },
    });
    req.on("error", () => undefined);
    req.end(JSON.stringify(body));
    setTimeout(() => {
      req.destroy();
      resolve();
    }, afterMs);
  });
}

describe("a batch handler's request", () => {
  it("answers a bad input with 400 naming the field, and frees its slot", async () => {
    const definition = defineBatchHandler({
      input: z.object({ text: z.string().min(1) }),
      batch: { maxSize: 1, maxWaitMs: 20 },
      concurrency: 1,
      async handler({ inputs }) {
        return inputs.map((i) => ({ len: i.text.length }));
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const bad = await within(5000, post(`${lb.url}/runsync`, { input: { text: "" } }));
    expect(bad).not.toBe("no answer");
    if (bad === "no answer") return;
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error).toContain("text");
    const next = await within(5000, post(`${lb.url}/runsync`, { input: { text: "abc" } }));
    expect(next !== "no answer" && next.status).toBe(200);
    expect(next !== "no answer" && JSON.parse(next.text).output).toEqual({ len: 3 });
  });

  it("frees the slot of a request whose client hangs up while it waits for its batch", async () => {
    const definition = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 2, maxWaitMs: 1500 },
      concurrency: 1,
      async handler({ inputs }) {
        return inputs.map((i) => i.n);
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    // Alone in the filling batch (its window is 1.5 s), it hangs up while it waits.
    await hangUp(`${lb.url}/runsync`, { input: { n: 1 } }, 200);
    await sleep(100);
    // Its slot is free: two requests at once (the limit, one batch of two) are both taken.
    const answers = await Promise.all(
      [2, 3].map((n) => within(5000, post(`${lb.url}/runsync`, { input: { n } }))),
    );
    expect(answers.map((a) => (a === "no answer" ? a : a.status))).toEqual([200, 200]);
    expect(answers.map((a) => (a === "no answer" ? a : JSON.parse(a.text).output))).toEqual([2, 3]);
  });

  it("lets a hung-up request go from its batch once: its deadline neither ends the batch nor hard-stops it", async () => {
    const ends: { aborted: boolean; size: number }[] = [];
    const definition = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 2, maxWaitMs: 1000 },
      concurrency: 2,
      hardStopGraceMs: 100,
      async handler({ inputs, signal }) {
        // Ignores the per-job signals: the batch runs on for the one still wanted.
        await sleep(1200);
        ends.push({ aborted: signal.aborted, size: inputs.length });
        return inputs.map((i) => i.n);
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    // Both join one batch; the first hangs up, then its deadline (300 ms) passes, then the grace.
    const first = hangUp(`${lb.url}/runsync`, { input: { n: 1 }, policy: { executionTimeout: 300 } }, 150);
    const second = post(`${lb.url}/runsync`, { input: { n: 2 } });
    await first;
    const answer = await second;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).output).toBe(2);
    expect(ends).toEqual([{ aborted: false, size: 2 }]);
    const warned = lb.lines.filter((line) => /ignored its aborted signal/.test(String(line["message"])));
    expect(warned).toEqual([]);
    expect(lb.lines.some((line) => line["reason"] === "runaway")).toBe(false);
  });

  it("ends a request let go from its running batch at once: its slot is free before the batch ends", async () => {
    const hold = gate();
    const definition = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 2, maxWaitMs: 1000 },
      concurrency: 1,
      async handler({ inputs }) {
        await hold.promise;
        return inputs.map((i) => i.n);
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const timesOut = post(`${lb.url}/runsync`, { input: { n: 1 }, policy: { executionTimeout: 200 } });
    const runsOn = post(`${lb.url}/runsync`, { input: { n: 2 } });
    expect((await timesOut).status).toBe(504);
    // Two requests at once (one batch of two): the one timed out holds no slot, so a third is taken.
    const third = post(`${lb.url}/runsync`, { input: { n: 3 } });
    await sleep(200);
    hold.open();
    expect((await runsOn).status).toBe(200);
    const answer = await third;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).output).toBe(3);
  });

  it("takes concurrency × maxSize requests at once: four at once to a maxSize 4 handler run as one batch", async () => {
    const sizes: number[] = [];
    const definition = defineBatchHandler({
      input: z.object({ n: z.number() }),
      batch: { maxSize: 4, maxWaitMs: 2000 },
      concurrency: 1,
      async handler({ inputs }) {
        sizes.push(inputs.length);
        return inputs.map((i) => i.n * 10);
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const answers = await Promise.all([1, 2, 3, 4].map((n) => post(`${lb.url}/runsync`, { input: { n } })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(answers.map((a) => JSON.parse(a.text).output)).toEqual([10, 20, 30, 40]);
    expect(sizes).toEqual([4]);
  });
});

describe("a plain in-process handler that ignores its signal", () => {
  it("is a runaway: health answers 503 and the worker stops, as in queue mode", async () => {
    const definition = defineHandler({
      concurrency: 1,
      hardStopGraceMs: 100,
      async handler() {
        await new Promise(() => undefined);
        return 1;
      },
    });
    const lb = await startLbWorker(definition, { shutdownGraceMs: 200 });
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const answer = await post(`${lb.url}/runsync`, { input: {}, policy: { executionTimeout: 200 } });
    expect(answer.status).toBe(504);
    await waitForAsync("health to answer 503", async () => {
      try {
        return (await call(`${lb.url}/ping`)).status === 503;
      } catch {
        return false;
      }
    });
    const info = await lb.worker.stopped;
    expect(info).toMatchObject({ reason: "runaway", exitCode: 1 });
    expect(lb.lines.some((line) => String(line["message"]).includes("ignored its aborted signal"))).toBe(
      true,
    );
  });
});
