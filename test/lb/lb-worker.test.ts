import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/handler/index.js";
import { call, gate, post, startLbWorker } from "../support/lb-support.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * A load-balancing worker (docs/load-balancing.md) in this process, over real HTTP on loopback:
 * health through each start-up phase, the concurrency limit, the body limit, a client's hang-up,
 * the deadline, validation, and health answered while the main thread is blocked.
 */

describe("health through the start-up phases", () => {
  it("answers 204 during a slow fitness check and a slow setup, 200 once ready", async () => {
    const fitness = gate();
    const setup = gate();
    const phases: string[] = [];
    const definition = defineHandler({
      healthCheck: async () => {
        phases.push("fitness");
        await fitness.promise;
      },
      setup: async () => {
        phases.push("setup");
        await setup.promise;
        return { model: "loaded" };
      },
      handler: ({ state }) => state,
    });
    await using lb = await startLbWorker(definition);
    await waitFor("the fitness check to start", () => phases.includes("fitness"));
    expect((await call(`${lb.url}/ping`)).status).toBe(204);
    // A request before ready is refused, not queued.
    expect((await post(`${lb.url}/run`, { input: {} })).status).toBe(503);
    fitness.open();
    await waitFor("setup to start", () => phases.includes("setup"));
    expect((await call(`${lb.url}/ping`)).status).toBe(204);
    setup.open();
    await waitForAsync("health to say ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const answer = await post(`${lb.url}/runsync`, { input: {} });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ status: "COMPLETED", output: { model: "loaded" } });
  });

  it("answers non-2xx and stops with exit code 1 when the fitness check fails", async () => {
    const definition = defineHandler({
      healthCheck: () => {
        throw new Error("no GPU here");
      },
      handler: () => "never",
    });
    const lb = await startLbWorker(definition);
    const info = await lb.worker.stopped;
    expect(info).toMatchObject({ reason: "unhealthy", exitCode: 1 });
    // The port is gone with the worker: nothing answers 2xx any more.
    await expect(call(`${lb.url}/ping`)).rejects.toThrow();
  });

  it("answers 503 from the moment the worker stops", async () => {
    const running = gate();
    const release = gate();
    const definition = defineHandler({
      handler: async () => {
        running.open();
        await release.promise;
        return "done";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const inFlight = post(`${lb.url}/run`, { input: {} });
    await running.promise;
    const closing = lb.worker.close();
    await waitForAsync("health to say stopping", async () => (await call(`${lb.url}/ping`)).status === 503);
    release.open();
    // The request in flight still finishes within the grace.
    expect((await inFlight).status).toBe(200);
    await closing;
  });

  it("answers health while a handler blocks the main thread", async () => {
    const definition = defineHandler({
      handler: () => {
        const until = Date.now() + 1_500;
        while (Date.now() < until) {
          // Holds the main thread on purpose.
        }
        return "unblocked";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const blocked = post(`${lb.url}/run`, { input: {} });
    await sleep(300);
    const started = Date.now();
    const health = await call(`${lb.url}/ping`);
    expect(health.status).toBe(200);
    // Answered by the front thread while the main thread was still held.
    expect(Date.now() - started).toBeLessThan(1_000);
    expect((await blocked).status).toBe(200);
  });
});

describe("the job path's limits", () => {
  it("refuses a request past the concurrency limit at once with 429", async () => {
    const release = gate();
    const running = gate();
    const definition = defineHandler({
      concurrency: 1,
      handler: async () => {
        running.open();
        await release.promise;
        return "first";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const first = post(`${lb.url}/run`, { input: {} });
    await running.promise;
    const second = await post(`${lb.url}/run`, { input: {} });
    expect(second.status).toBe(429);
    expect(second.headers["retry-after"]).toBe("1");
    expect(JSON.parse(second.text).error).toMatch(/concurrency limit \(1/);
    release.open();
    expect((await first).status).toBe(200);
  });

  it("refuses a 31 MB body with 413, by its length and without one", async () => {
    let calls = 0;
    const definition = defineHandler({
      handler: () => {
        calls += 1;
        return "ran";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    // By its length: only the headers are sent, and the answer comes before any of the body.
    const byLength = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        `${lb.url}/run`,
        { method: "POST", agent: false, headers: { "content-length": String(31 * 1024 * 1024) } },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => {
            text += c.toString();
          });
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, text });
            req.destroy();
          });
        },
      );
      req.on("error", reject);
      req.flushHeaders();
    });
    expect(byLength.status).toBe(413);
    expect(JSON.parse(byLength.text).error).toMatch(/31457280 bytes \(30 MB\)/);
    // Chunked, with no length: refused once the bytes read pass the limit.
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = request(`${lb.url}/run`, { method: "POST", agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      const piece = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const pump = (): void => {
        while (sent < 31) {
          sent += 1;
          if (!req.write(piece)) {
            req.once("drain", pump);
            return;
          }
        }
        req.end();
      };
      pump();
    });
    expect(chunked).toBe(413);
    expect(calls).toBe(0);
  });

  it("aborts the signal when the client hangs up mid-stream, and frees the slot", async () => {
    const aborted = gate();
    let calls = 0;
    const definition = defineHandler({
      concurrency: 1,
      async *handler({ signal }) {
        calls += 1;
        yield { token: "first" };
        if (calls > 1) return;
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        aborted.open();
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const firstEvent = await new Promise<string>((resolve) => {
      const req = request(
        `${lb.url}/stream`,
        { method: "POST", agent: false, headers: { "content-type": "application/json" } },
        (res) => {
          res.once("data", (chunk: Buffer) => {
            resolve(chunk.toString("utf8"));
            req.destroy();
          });
        },
      );
      req.on("error", () => undefined);
      req.end(JSON.stringify({ input: {} }));
    });
    expect(firstEvent).toContain('data: {"token":"first"}');
    await aborted.promise;
    // The slot is free again: the next request runs.
    const next = await waitForAsync("the slot to be free", async () => {
      const answer = await post(`${lb.url}/run`, { input: {} }, { accept: "application/json" });
      return answer.status === 200 ? answer : undefined;
    });
    expect(JSON.parse(next.text).status).toBe("COMPLETED");
  });

  it("answers 504 at the deadline and aborts the handler's signal", async () => {
    let reason: unknown;
    const definition = defineHandler({
      executionTimeoutMs: 300,
      handler: async ({ signal }) => {
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        reason = signal.reason;
        return "late";
      },
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const answer = await post(`${lb.url}/run`, { input: {} });
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.text)).toMatchObject({
      status: "TIMED_OUT",
      error: expect.stringMatching(/300 ms/),
    });
    await waitFor("the handler's signal", () => reason !== undefined);
    expect((reason as { code?: string }).code).toBe("RUNLET_JOB_TIMEOUT");
  });

  it("caps the deadline at 5.5 min and says so at start", async () => {
    const definition = defineHandler({ executionTimeoutMs: 900_000, handler: () => "ok" });
    await using lb = await startLbWorker(definition);
    await waitFor("the cap's line", () =>
      lb.lines.find((l) => l["level"] === "WARN" && String(l["message"]).includes("330000 ms")),
    );
  });

  it("names every bad field with 400, and serves declared paths with the body as input", async () => {
    const definition = defineHandler({
      input: z.object({ text: z.string(), count: z.number().int() }),
      paths: ["/generate"],
      handler: ({ input }) => ({ n: input.text.length * input.count }),
    });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const bad = await post(`${lb.url}/run`, { input: { text: 1, count: "x" } });
    expect(bad.status).toBe(400);
    const error = JSON.parse(bad.text).error as string;
    expect(error).toContain("text");
    expect(error).toContain("count");
    const custom = await post(`${lb.url}/generate`, { text: "abc", count: 2 });
    expect(custom.status).toBe(200);
    expect(JSON.parse(custom.text).output).toEqual({ n: 6 });
    expect(custom.headers["x-request-id"]).toMatch(/^lb-/);
    expect((await post(`${lb.url}/elsewhere`, {})).status).toBe(404);
  });

  it("never logs a request's Authorization header", async () => {
    const definition = defineHandler({ handler: () => "ok" });
    await using lb = await startLbWorker(definition);
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    await post(`${lb.url}/run`, { input: {} }, { authorization: "Bearer sk-secret-value-123" });
    await waitFor("the request's line", () => lb.lines.find((l) => l["message"] === "request answered"));
    expect(JSON.stringify(lb.lines)).not.toContain("sk-secret-value-123");
  });

  it("answers health on PORT_HEALTH at HEALTH_CHECK_PATH, and nothing else there", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const healthPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const definition = defineHandler({ handler: () => "ok" });
    await using lb = await startLbWorker(definition, {
      env: { PORT_HEALTH: String(healthPort), HEALTH_CHECK_PATH: "/healthz" },
    });
    const health = `http://127.0.0.1:${healthPort}`;
    await waitForAsync(
      "ready on the health port",
      async () => (await call(`${health}/healthz`)).status === 200,
    );
    expect((await post(`${health}/run`, { input: {} })).status).toBe(404);
    expect((await call(`${lb.url}/ping`)).status).toBe(404);
    expect((await post(`${lb.url}/run`, { input: {} })).status).toBe(200);
  });
});
