import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { ManualClock, startHarness } from "../../src/harness/index.js";
import { api, postDone, takeJob } from "../support/harness-calls.js";

/** A real webhook receiver on loopback answering the given statuses in turn. */
async function receiver(statuses: number[]) {
  const bodies: unknown[] = [];
  const server = createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => {
      text += c.toString();
    });
    req.on("end", () => {
      bodies.push({ contentType: req.headers["content-type"], body: JSON.parse(text) as unknown });
      res.writeHead(statuses.shift() ?? 200);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    bodies,
    [Symbol.asyncDispose]: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("harness webhooks", () => {
  it("POSTs the final record, retrying twice 10 s apart on the harness clock after non-2xx answers", async () => {
    await using hook = await receiver([500, 503, 200]);
    const clock = new ManualClock();
    await using h = await startHarness({ clock, takeTimeoutMs: 200 });
    const { id } = (await api(h, "POST", "/v2/local/run", { input: {}, webhook: hook.url })).body as {
      id: string;
    };
    await takeJob(h);
    clock.advance(250);
    await postDone(h, id, { output: { ok: true } });
    const record = {
      id,
      status: "COMPLETED",
      delayTime: 0,
      executionTime: 250,
      output: { ok: true },
      workerId: "w1",
    };
    await expect.poll(() => h.webhookAttempts().length).toBe(1);
    clock.advance(9_999);
    expect(hook.bodies).toHaveLength(1);
    clock.advance(1);
    await expect.poll(() => h.webhookAttempts().length).toBe(2);
    clock.advance(10_000);
    await expect.poll(() => h.webhookAttempts().length).toBe(3);
    expect(hook.bodies).toEqual([1, 2, 3].map(() => ({ contentType: "application/json", body: record })));
    expect(h.webhookAttempts().map((a) => [a.attempt, a.outcome, a.ok])).toEqual([
      [1, 500, false],
      [2, 503, false],
      [3, 200, true],
    ]);
  });

  it("gives up after three failed attempts, including network errors", async () => {
    const clock = new ManualClock();
    await using h = await startHarness({ clock, takeTimeoutMs: 200, webhooks: { retryDelayMs: 50 } });
    const id = h.enqueue("local", { input: {}, webhook: "http://127.0.0.1:1/hook" });
    await takeJob(h);
    await postDone(h, id, { error: "x" });
    for (let n = 1; n <= 3; n++) {
      await expect.poll(() => h.webhookAttempts().length).toBe(n);
      clock.advance(50);
    }
    clock.advance(1_000);
    expect(h.webhookAttempts().map((a) => [a.attempt, a.ok, typeof a.outcome])).toEqual([
      [1, false, "string"],
      [2, false, "string"],
      [3, false, "string"],
    ]);
  });
});

describe("harness scaling", () => {
  it("starts a worker per waiting job up to maxWorkers, but not for lowPriority jobs", async () => {
    const started: Array<Record<string, string>> = [];
    let closed = 0;
    await using h = await startHarness({
      takeTimeoutMs: 200,
      endpoints: [
        {
          id: "local",
          maxWorkers: 2,
          spawn: async (env) => {
            started.push(env);
            return { close: async () => void closed++ };
          },
        },
      ],
    });
    await api(h, "POST", "/v2/local/run", { input: {}, policy: { lowPriority: true } });
    await new Promise((r) => setImmediate(r));
    await h.workersStarted("local");
    expect(started).toHaveLength(0);
    await api(h, "POST", "/v2/local/run", { input: {} });
    await expect.poll(() => started.length).toBe(1);
    expect(started[0]).toEqual(h.workerEnv("local", { podId: "local-worker-1" }));
    expect(h.health("local").workers).toMatchObject({ initializing: 1, idle: 0 });
    await api(h, "POST", "/v2/local/run", { input: {} });
    await api(h, "POST", "/v2/local/run", { input: {} });
    await expect.poll(() => started.length).toBe(2);
    // The first started worker connects: it no longer counts as initializing.
    await takeJob(h, "local", "local-worker-1");
    expect(h.health("local").workers).toMatchObject({ initializing: 1, running: 1 });
    await h.close();
    expect(closed).toBe(2);
    expect(started).toHaveLength(2);
  });

  it("starts minWorkers at once and replaces a worker that asks for it with stopPod", async () => {
    const started: string[] = [];
    const closed: string[] = [];
    await using h = await startHarness({
      takeTimeoutMs: 200,
      endpoints: [
        {
          id: "local",
          minWorkers: 1,
          spawn: async (env) => {
            const { RUNPOD_POD_ID: pod = "" } = env;
            started.push(pod);
            return { close: async () => void closed.push(pod) };
          },
        },
      ],
    });
    await expect.poll(() => started).toEqual(["local-worker-1"]);
    const id = h.enqueue("local", { input: {} });
    await takeJob(h, "local", "local-worker-1");
    await postDone(h, id, { output: 1, stopPod: true }, { workerId: "local-worker-1" });
    await expect.poll(() => started).toEqual(["local-worker-1", "local-worker-2"]);
    expect(closed).toEqual(["local-worker-1"]);
  });

  it("replaces a started worker that ends on its own", async () => {
    const started: string[] = [];
    const crash: Array<() => void> = [];
    await using _h = await startHarness({
      takeTimeoutMs: 200,
      endpoints: [
        {
          id: "local",
          minWorkers: 1,
          spawn: async (env) => {
            const { RUNPOD_POD_ID: pod = "" } = env;
            started.push(pod);
            const exited = new Promise<void>((resolve) => crash.push(resolve));
            return { close: async () => {}, exited };
          },
        },
      ],
    });
    await expect.poll(() => started).toEqual(["local-worker-1"]);
    crash[0]?.();
    await expect.poll(() => started).toEqual(["local-worker-1", "local-worker-2"]);
  });
});
