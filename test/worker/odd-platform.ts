import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A platform stand-in on loopback for answers the harness never gives: each take (job-take or
 * job-take-batch) is answered with the next scripted body, and held open once the script is
 * used up (as a long poll with no job); job-stop is held too; result posts are recorded and
 * answered 200. It counts the connections open at once.
 */
export interface OddPost {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export async function startOddPlatform(takeAnswers: Array<string | (() => string)>) {
  const posts: OddPost[] = [];
  const held: ServerResponse[] = [];
  let takes = 0;
  let takeRequests = 0;
  let open = 0;
  let maxOpen = 0;
  const server = createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const path = new URL(req.url ?? "/", "http://stand-in").pathname;
    if (path.includes("/job-take")) {
      takeRequests += 1;
      const next = takeAnswers.shift();
      if (next === undefined) {
        held.push(res);
        return;
      }
      takes += 1;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(typeof next === "string" ? next : next());
      return;
    }
    if (path.includes("/job-stop")) {
      held.push(res);
      return;
    }
    if (req.method === "POST")
      posts.push({ path, headers: req.headers, body: Buffer.concat(parts).toString() });
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  server.on("connection", (socket) => {
    open += 1;
    maxOpen = Math.max(maxOpen, open);
    socket.on("close", () => {
      open -= 1;
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}/v2/odd`;
  return {
    posts,
    /** Takes answered from the script so far. */
    get takes(): number {
      return takes;
    },
    /** Takes received, answered or held. */
    get takeRequests(): number {
      return takeRequests;
    },
    /** The most connections open at once. */
    get maxOpen(): number {
      return maxOpen;
    },
    env: {
      RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID`,
      RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID`,
      RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID`,
      RUNPOD_AI_API_KEY: "odd-key",
      RUNPOD_POD_ID: "pod",
      RUNPOD_ENDPOINT_ID: "odd",
    },
    async [Symbol.asyncDispose]() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
