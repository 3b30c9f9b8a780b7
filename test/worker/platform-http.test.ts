import { getEventListeners } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { PlatformHttp } from "../../src/worker/platform/platform-http.js";

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
  it("aborts every request in flight on a shared signal with its reason, with one listener on it at most however many requests it served", async () => {
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

      // A signal that outlives its requests (the worker's give-up signal) holds one listener while a
      // request is in flight and none once they are answered, however many it served; aborting it
      // later touches none of the answered ones.
      const poll = new AbortController();
      for (let n = 0; n < 5; n++) {
        const answered = http.get(server.url, { signal: poll.signal });
        await server.arrivals(4 + n);
        expect(getEventListeners(poll.signal, "abort")).toHaveLength(1);
        server.release();
        expect((await answered).status).toBe(200);
      }
      expect(getEventListeners(poll.signal, "abort")).toHaveLength(0);
      poll.abort(new Error("late"));
      expect(getEventListeners(poll.signal, "abort")).toHaveLength(0);
    } finally {
      await http.close();
    }
  });

  it("sends each URL's path and query as the URL parser reads them, however many share an origin", async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(req.url ?? "");
      req.resume();
      req.once("end", () => res.writeHead(200).end("{}"));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const http = new PlatformHttp("key");
    try {
      // The first URL teaches the origin; the rest either are sent as written or must be parsed.
      const urls = [
        `${origin}/v2/ep/job-done/pod/j1?isStream=false`,
        `${origin}/v2/ep/job-done/pod/j%2F2?gpu=A100&isStream=true`,
        `${origin}/v2/ep/job-done/pod/../j3?isStream=false`,
        `${origin}/v2/ep/job-done/pod/./j4`,
        `${origin}/v2/ep/a b/ü?q=x y`,
        `${origin}/v2/ep/job-done/pod/j5#fragment`,
        `${origin}/v2/ep/job-done/pod/..`,
        `${origin}/v2/ep/job-done/pod/.well-known/j6`,
      ];
      for (const url of urls) await http.postJson(url, "{}");
      const parsed = urls.map((url) => {
        const u = new URL(url);
        return `${u.pathname}${u.search}`;
      });
      expect(seen).toEqual(parsed);
    } finally {
      await http.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("sends a header's Latin-1 characters as single bytes and a string body as UTF-8, in the same post", async () => {
    const seen: { id: string | undefined; key: string | undefined; body: Buffer }[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.once("end", () => {
        // Node reads header bytes as Latin-1: one byte, one character.
        seen.push({
          id: req.headers["x-request-id"] as string | undefined,
          key: req.headers.authorization,
          body: Buffer.concat(chunks),
        });
        res.writeHead(200).end("{}");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const http = new PlatformHttp("k\u00e9y-\u00ff");
    try {
      const body = JSON.stringify({ output: "caf\u00e9 \u65e5\u672c" });
      const answer = await http.postJson(`${origin}/v2/ep/job-stream/pod/j`, body, { jobId: "caf\u00e9" });
      expect(answer.status).toBe(200);
      expect(seen).toHaveLength(1);
      // Sent as UTF-8 these would arrive as two characters each ("cafÃ©").
      expect(seen[0]!.id).toBe("caf\u00e9");
      expect(seen[0]!.key).toBe("k\u00e9y-\u00ff");
      expect(seen[0]!.body.toString("utf8")).toBe(body);
    } finally {
      await http.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
