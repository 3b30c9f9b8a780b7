import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { Heartbeat } from "../../src/worker/platform/heartbeat.js";
import { waitFor } from "../support/workers.js";

/**
 * The wait for the unhealthy ping's answer is bounded on the worker's clock (it was a plain timer
 * of six intervals plus 2 s: with a 60 s interval, a ping nobody answers held shutdown six
 * minutes of real time, and a test could not move it). The ping goes to a loopback server that
 * takes the request and never answers.
 */
describe("Heartbeat.unhealthy", () => {
  it("gives up waiting for an unanswered ping when the bound passes on the clock", async () => {
    const requests: string[] = [];
    const server = createServer((req) => {
      requests.push(req.url ?? "");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const clock = new ManualClock();
    const heartbeat = new Heartbeat({
      pingUrl: `http://127.0.0.1:${port}/ping/w`,
      intervalMs: 60_000,
      apiKey: "key",
      watchdog: undefined,
      holdPings: true,
      log: pino({ level: "silent" }),
      clock,
    });
    try {
      let done = false;
      const ping = heartbeat.unhealthy("gpu", "lost").then(() => {
        done = true;
      });
      await waitFor("the unhealthy ping to reach the server", () =>
        requests.some((url) => url.includes("status=unhealthy")),
      );
      expect(done).toBe(false);
      clock.advance(60_000 * 6 + 2_000);
      await ping;
      expect(done).toBe(true);
    } finally {
      await heartbeat.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
