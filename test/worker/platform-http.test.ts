import { getEventListeners } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { PlatformHttp } from "../../src/worker/platform-http.js";

/** A loopback server that holds every request until `release()` (or answers at once when told). */
async function holdingServer() {
  const held: ServerResponse[] = [];
  let arrived = 0;
  let onArrive: (() => void) | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.once("end", () => {
      arrived += 1;
      held.push(res);
      onArrive?.();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v2/ep/job-stream/pod/job`,
    /** Resolves once `count` requests have arrived in all. */
    arrivals: (count: number) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (arrived >= count) resolve();
        };
        onArrive = check;
        check();
      }),
    release: () => {
      for (const res of held.splice(0)) res.writeHead(200, { "content-type": "application/json" }).end("{}");
    },
    [Symbol.asyncDispose]: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("PlatformHttp and its callers' signals", () => {
  it("aborts every request in flight on a shared signal with its reason, and keeps no listener once they settle", async () => {
    await using server = await holdingServer();
    const http = new PlatformHttp("key");
    try {
      const giveUp = new AbortController();
      const posts = [1, 2, 3].map((n) =>
        http.postJson(server.url, `{"output":${n}}`, { signal: giveUp.signal }),
      );
      const outcomes = Promise.allSettled(posts);
      await server.arrivals(3);
      expect(getEventListeners(giveUp.signal, "abort")).toHaveLength(1);
      const reason = new Error("flush deadline");
      giveUp.abort(reason);
      expect((await outcomes).map((o) => (o.status === "rejected" ? o.reason : o.status))).toEqual([
        reason,
        reason,
        reason,
      ]);

      // A signal that outlives its requests (a take poll's) holds nothing of them once they are answered.
      const poll = new AbortController();
      const answered = http.get(server.url, { signal: poll.signal });
      await server.arrivals(4);
      expect(getEventListeners(poll.signal, "abort")).toHaveLength(1);
      server.release();
      expect((await answered).status).toBe(200);
      expect(getEventListeners(poll.signal, "abort")).toHaveLength(0);
    } finally {
      await http.close();
    }
  });
});
