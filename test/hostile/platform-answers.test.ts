import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/handler/index.js";
import { startHarness } from "../../src/harness/index.js";
import { startWorker } from "../../src/worker/index.js";
import { MAX_REDIRECTS, PlatformHttp } from "../../src/worker/platform/platform-http.js";
import { logSink, waitFor, workerFor } from "../support/workers.js";

// Issue 32, items 2, 6 and the take aborted on close: every answer the worker reads is bounded in
// bytes and time and still counts; a redirect is followed, never taken for a rejection; a take
// answer already on the wire when close() aborts it is read, not dropped.

const echo = defineHandler({ handler: ({ input }) => input });

/** Writes "x" to `res` for as long as the client reads, counting the bytes. */
function endless(res: ServerResponse, counter: { bytes: number; ended: boolean }, pieceMs = 0): void {
  const piece = Buffer.alloc(pieceMs > 0 ? 1 : 65_536, "x");
  res.writeHead(200, { "content-type": "application/json" });
  res.on("close", () => {
    counter.ended = true;
  });
  const pump = (): void => {
    while (!res.destroyed) {
      counter.bytes += piece.length;
      const more = res.write(piece);
      if (pieceMs > 0) {
        setTimeout(pump, pieceMs);
        return;
      }
      if (!more) {
        res.once("drain", pump);
        return;
      }
    }
  };
  pump();
}

describe("answers the worker reads are bounded, and still count (issue 32)", () => {
  it("takes a job-done answered 200 with an endless body as delivered, reading about 1 MiB of it", async () => {
    const answer = { bytes: 0, ended: false };
    const posts: string[] = [];
    let takes = 0;
    const server = createServer(async (req, res) => {
      const parts: Buffer[] = [];
      for await (const part of req) parts.push(part as Buffer);
      if (req.url?.includes("/job-take")) {
        takes += 1;
        if (takes === 1) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ id: "j1", input: { n: 1 } }));
        }
        return; // later takes are held, as a long poll with no job
      }
      if (req.url?.includes("/job-done")) {
        posts.push(Buffer.concat(parts).toString());
        endless(res, answer);
        return;
      }
      res.writeHead(200).end("{}");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/odd`;
    const sink = logSink();
    const worker = await startWorker(echo, {
      env: {
        RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID`,
        RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID`,
        RUNPOD_AI_API_KEY: "odd-key",
        RUNPOD_POD_ID: "pod",
        RUNPOD_ENDPOINT_ID: "odd",
      },
      logDestination: sink.stream,
      shutdownGraceMs: 1_000,
      flushTimeoutMs: 1_000,
    });
    try {
      // The worker stops reading and drops the connection: the endless answer ends.
      await waitFor("the worker to drop the endless answer", () => answer.ended, 20_000);
      expect(answer.bytes).toBeLessThan(64 * 1_048_576);
      await worker.close();
      expect(posts).toEqual(['{"output":{"n":1}}']);
      expect(sink.text()).not.toContain("RUNLET_REPORT_GAVE_UP");
      expect(sink.text()).not.toContain("RUNLET_REPORT_REJECTED");
    } finally {
      await worker.close();
      server.closeAllConnections();
      server.close();
    }
  });

  it("takes a ping answered 200 with an endless body as answered (the heartbeat thread drains 64 KiB of it)", async () => {
    const answers: Array<{ bytes: number; ended: boolean }> = [];
    const server = createServer((req, res) => {
      req.resume();
      if (req.url?.includes("/ping/")) {
        const answer = { bytes: 0, ended: false };
        answers.push(answer);
        endless(res, answer);
      }
      // takes are held: no job
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/odd`;
    const sink = logSink();
    const worker = await startWorker(echo, {
      env: {
        RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID`,
        RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID`,
        RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID`,
        RUNPOD_PING_INTERVAL: "200",
        RUNPOD_AI_API_KEY: "odd-key",
        RUNPOD_POD_ID: "pod",
        RUNPOD_ENDPOINT_ID: "odd",
      },
      logDestination: sink.stream,
      shutdownGraceMs: 500,
      flushTimeoutMs: 500,
    });
    try {
      await waitFor("three pings dropped by the worker", () => answers.filter((a) => a.ended).length >= 3);
      expect(sink.text()).not.toContain("heartbeat ping failed");
      for (const a of answers.filter((x) => x.ended)) expect(a.bytes).toBeLessThan(16 * 1_048_576);
    } finally {
      await worker.close();
      server.closeAllConnections();
      server.close();
    }
  });

  it("bounds the time an answer's body may take, and keeps its status", async () => {
    const answer = { bytes: 0, ended: false };
    const server = createServer((req, res) => {
      req.resume();
      endless(res, answer, 20); // one byte every 20 ms, for ever
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2/odd/job-done/pod/j1`;
    const http = new PlatformHttp("key");
    try {
      const res = await http.postJson(url, '{"output":1}', { answerTimeoutMs: 60_000, answerBodyMs: 300 });
      expect(res.status).toBe(200);
      expect(res.truncated).toBe("time");
      await waitFor("the connection to be dropped", () => answer.ended);
    } finally {
      await http.close();
      server.closeAllConnections();
      server.close();
    }
  });

  it("follows a 307 and a 308 on job-done with the same body, and delivers the result", async () => {
    // On loopback: the 3xx answers are read by the socket client a worker uses (in memory: node:http only).
    await using h = await startHarness({ takeTimeoutMs: 300 });
    h.injectFault("job-done", { status: 307, location: "?isStream=false&hop=1" });
    h.injectFault("job-done", { status: 308, location: "?isStream=false&hop=2" });
    const id = h.enqueue("local", { input: { kept: "whole" } });
    await using _w = await workerFor(h, echo);
    await waitFor("the job to end", () => {
      const status = h.job(id)?.status;
      return status === "COMPLETED" || status === "FAILED" ? status : undefined;
    });
    expect(h.job(id)).toMatchObject({ status: "COMPLETED", output: { kept: "whole" } });
    const done = h.requests({ route: "job-done" });
    expect(done.map((r) => r.query["hop"])).toEqual([undefined, "1", "2"]);
    expect(new Set(done.map((r) => r.body))).toEqual(new Set(['{"output":{"kept":"whole"}}']));
  });

  it("gives up a redirect loop after MAX_REDIRECTS hops as a network error, not an answer", async () => {
    let hops = 0;
    const server = createServer((req, res) => {
      req.resume();
      hops += 1;
      res.writeHead(307, { location: `/loop/${hops}` }).end();
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/loop/0`;
    const http = new PlatformHttp("key");
    try {
      await expect(http.postJson(url, "{}")).rejects.toMatchObject({ code: "RUNLET_REQUEST_REDIRECTS" });
      expect(hops).toBe(MAX_REDIRECTS + 1);
    } finally {
      await http.close();
      server.close();
    }
  });

  it("sends the key to the same host only, never to another host a redirect names", async () => {
    const seen: Array<string | undefined> = [];
    const other = createServer((req, res) => {
      req.resume();
      seen.push(req.headers.authorization);
      res.writeHead(200).end("{}");
    });
    other.listen(0, "127.0.0.1");
    await once(other, "listening");
    const otherPort = (other.address() as AddressInfo).port;
    const first = createServer((req, res) => {
      req.resume();
      seen.push(req.headers.authorization);
      // "localhost" is another host name than 127.0.0.1, though it is the same machine.
      res.writeHead(308, { location: `http://localhost:${otherPort}/done` }).end();
    });
    first.listen(0, "127.0.0.1");
    await once(first, "listening");
    const http = new PlatformHttp("secret-key");
    try {
      const res = await http.postJson(`http://127.0.0.1:${(first.address() as AddressInfo).port}/x`, "{}");
      expect(res.status).toBe(200);
      expect(seen).toEqual(["secret-key", undefined]);
    } finally {
      await http.close();
      first.close();
      other.close();
    }
  });

  it("reads a take answer already on the wire when close() aborts it: the job runs, not left IN_PROGRESS", async () => {
    await using h = await startHarness({ takeTimeoutMs: 5_000 });
    const target = new URL(h.url);
    let id = "";
    let closing: Promise<void> | undefined;
    let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
    // A TCP relay between the worker and the harness: when the harness's take answer (naming the
    // job) comes through, the worker is closed first and the answer forwarded after, so close()
    // aborts a take whose answer is already on its way.
    const sockets = new Set<Socket>();
    const relay = createTcpServer((client) => {
      const upstream = connect(Number(target.port), target.hostname);
      sockets.add(client).add(upstream);
      client.on("data", (chunk) => upstream.write(chunk));
      upstream.on("data", (chunk) => {
        if (closing === undefined && id !== "" && chunk.includes(id) && worker !== undefined) {
          closing = worker.close();
        }
        if (!client.destroyed) client.write(chunk);
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("close", end).on("error", end);
      upstream.on("close", end).on("error", end);
    });
    relay.listen(0, "127.0.0.1");
    await once(relay, "listening");
    const relayed = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
    const env = Object.fromEntries(
      Object.entries(h.workerEnv("local")).map(([k, v]) => [k, v.replace(h.url, relayed)]),
    );
    try {
      worker = await startWorker(echo, {
        env: { ...env, RUNPOD_ENDPOINT_ID: "local" },
        logDestination: logSink().stream,
        shutdownGraceMs: 5_000,
        flushTimeoutMs: 5_000,
      });
      // Let the worker's take reach the harness and wait there, then hand it a job.
      await waitFor("the take to wait", () => h.requests({ route: "job-take" }).length > 0);
      id = h.enqueue("local", { input: { on: "the wire" } });
      await waitFor("close() to be called", () => closing);
      await closing;
      expect(h.job(id)).toMatchObject({ status: "COMPLETED", output: { on: "the wire" } });
    } finally {
      await worker?.close();
      for (const s of sockets) s.destroy();
      relay.close();
    }
  });
});
