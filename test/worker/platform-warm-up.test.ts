import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PlatformHttp, WARM_UP_IDLE_MS } from "../../src/worker/platform/platform-http.js";

// Issue 43, item 4: the platform client starts on node:http and loads undici's Pool only when the
// worker is idle after its first job (an idle take in flight, no post in flight), never before.

const held: ServerResponse[] = [];
let base: string;
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  req.resume();
  req.on("end", () => {
    if (req.url?.includes("hold")) {
      held.push(res);
      return;
    }
    res.writeHead(200);
    res.end("{}");
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const res of held.splice(0)) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const idleTake = () => `${base}/job-take/pod?hold=1&job_in_progress=0`;

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await pause(20);
  }
  return check();
}

describe("the platform client's fast path (issue 43)", () => {
  it("stays on node:http for the first take, and moves to undici once idle after a job", async () => {
    const http = new PlatformHttp("key");
    try {
      // Before any job: an idle take alone does not load undici.
      const first = http.take(idleTake(), false).catch(() => undefined);
      await pause(WARM_UP_IDLE_MS * 3);
      expect(http.client).toBe("node:http");
      // A job's result, then an idle take: undici loads in the background.
      await http.postJson(`${base}/job-done/pod/j1?isStream=false`, '{"output":1}');
      expect(http.client).toBe("node:http");
      expect(await until(() => http.client === "undici", 10_000)).toBe(true);
      // And serves the next posts.
      expect((await http.postJson(`${base}/job-done/pod/j2?isStream=false`, '{"output":2}')).status).toBe(
        200,
      );
      void first;
    } finally {
      await http.close();
    }
  });

  it("moves to undici when the jobs end under a take sent while they ran (job_in_progress=1)", async () => {
    // A worker with spare slots keeps a take held while its jobs finish: that take said
    // job_in_progress=1 when it went out, and only the job board knows the worker is idle now.
    const http = new PlatformHttp("key");
    try {
      http.jobsHeld(1);
      void http
        .take(`${base}/job-take-batch/pod?hold=1&batch_size=3&job_in_progress=1`, true)
        .catch(() => undefined);
      await http.postJson(`${base}/job-done/pod/j1?isStream=false`, '{"output":1}');
      await pause(WARM_UP_IDLE_MS * 3);
      // A job is still held: nothing loads.
      expect(http.client).toBe("node:http");
      http.jobsHeld(0);
      expect(await until(() => http.client === "undici", 10_000)).toBe(true);
    } finally {
      await http.close();
    }
  });

  it("does not load it while a post is still in flight (a job's result on its way)", async () => {
    const http = new PlatformHttp("key");
    try {
      await http.postJson(`${base}/job-done/pod/j1?isStream=false`, '{"output":1}');
      const slowPost = http
        .postJson(`${base}/job-stream/pod/j2?hold=1`, '{"output":"x"}')
        .catch(() => undefined);
      void http.take(idleTake(), false).catch(() => undefined);
      await pause(WARM_UP_IDLE_MS * 3);
      expect(http.client).toBe("node:http");
      void slowPost;
    } finally {
      await http.close();
    }
  });
});
