import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createLoadBalancerClient } from "../../src/client/index.js";
import { defineHandler } from "../../src/handler/index.js";
import { startHarness } from "../../src/harness/index.js";
import { gate, startLbWorker } from "../support/lb-support.js";
import { waitFor } from "../support/wait-for.js";

/**
 * `createLoadBalancerClient` against the harness's load-balancing endpoint with two real
 * load-balancing workers: the retry of "no workers available", a session's affinity, streaming.
 */

describe("the load-balancer client", () => {
  it("defaults to https://<id>.api.runpod.ai and refuses bad options by name", () => {
    expect(createLoadBalancerClient({ endpointId: "abc123", apiKey: "k" }).baseUrl).toBe(
      "https://abc123.api.runpod.ai",
    );
    expect(() => createLoadBalancerClient({ apiKey: "k" })).toThrow(/endpointId/);
    expect(() => createLoadBalancerClient({ endpointId: "a", apiKey: "" })).toThrow(/apiKey/);
  });

  it("retries no workers available, keeps a session on its worker, and streams", async () => {
    const hold: { gate: ReturnType<typeof gate> | undefined } = { gate: undefined };
    const make = (name: string) =>
      defineHandler({
        concurrency: 1,
        async *handler({ input }) {
          await hold.gate?.promise;
          for (const word of String((input as { text?: unknown }).text ?? "").split(" "))
            yield { name, word };
        },
      });
    await using w1 = await startLbWorker(make("w1"));
    await using w2 = await startLbWorker(make("w2"));
    await using harness = await startHarness({
      loadBalancers: [{ id: "lbc", waitMs: 100, healthIntervalMs: 30 }],
    });
    const balancer = harness.loadBalancer("lbc");
    balancer.addWorker({ id: "w1", url: w1.url });
    balancer.addWorker({ id: "w2", url: w2.url });
    await waitFor("both ready", () => balancer.workers().every((w) => w.health === "ready"));
    const client = createLoadBalancerClient({
      baseUrl: `${harness.url}/lb/lbc`,
      apiKey: harness.apiKey,
      retryBaseMs: 150,
    });

    const session = client.session();
    const first = await session.runsync({ text: "a b" });
    expect(first.output).toEqual([
      { name: first.workerId, word: "a" },
      { name: first.workerId, word: "b" },
    ]);
    expect(session.workerId).toBe(first.workerId);
    for (let i = 0; i < 4; i += 1)
      expect((await session.runsync({ text: "x" })).workerId).toBe(first.workerId);

    const items: unknown[] = [];
    for await (const item of session.stream({ text: "one two three" })) items.push(item);
    expect(items).toEqual(["one", "two", "three"].map((word) => ({ name: first.workerId, word })));

    // Both workers busy: the first try answers "no workers available", a retry gets through.
    const g = gate();
    hold.gate = g;
    const busy = [client.runsync({ text: "busy" }), client.runsync({ text: "busy" })];
    await waitFor("both busy", () => balancer.workers().every((w) => w.inFlight === 1));
    const retried = client.runsync({ text: "later" });
    await waitFor("a refusal", () => balancer.requests().some((r) => r.status === 503));
    hold.gate = undefined;
    g.open();
    expect((await retried).status).toBe("COMPLETED");
    await Promise.all(busy);
  });

  it("throws RUNLET_CLIENT_BAD_RESPONSE when a stream's body ends without its done event", async () => {
    // A stand-in for a hop that cuts the stream (a proxy, a worker's process ending): the runlet
    // worker itself now ends a cut-off stream with an error event, so no real part here ends a
    // body cleanly without one.
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end('data: {"token":"first"}\n\n');
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const client = createLoadBalancerClient({ apiKey: "k", baseUrl: `http://127.0.0.1:${port}` });
      const items: unknown[] = [];
      const read = (async () => {
        for await (const item of client.stream({})) items.push(item);
      })();
      await expect(read).rejects.toMatchObject({
        code: "RUNLET_CLIENT_BAD_RESPONSE",
        message: expect.stringContaining("without its done event"),
      });
      expect(items).toEqual([{ token: "first" }]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
