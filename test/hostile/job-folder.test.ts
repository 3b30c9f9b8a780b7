import { once } from "node:events";
import { readdirSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/index.js";
import { createJobS3 } from "../../src/s3/index.js";
import { waitFor } from "../support/workers.js";

// Issue 32, item 3: a job's end (ctx.s3's cleanup) aborts the downloads still in flight and waits
// for them, so no per-job folder or file appears after it; a `{ to: "stream" }` download the
// handler never read is closed. A real HTTP server on loopback serves the downloads.

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "runlet-job-folder-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A server that holds each request until `release()`, then sends 1 MiB of 8 and stalls; it notes when a connection closes. */
async function slowServer() {
  const held: ServerResponse[] = [];
  // `cut`: a connection the client closed (nothing here closes one before `close()`), so an
  // aborted download that left its socket open shows.
  const state = { arrived: 0, cut: 0 };
  const server = createServer((req, res) => {
    req.resume();
    state.arrived += 1;
    req.socket.once("close", () => {
      state.cut += 1;
    });
    held.push(res);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.bin`,
    state,
    release() {
      // The head and the first MiB of 8, and nothing more until the client goes: a download is
      // then always mid-body when the test ends its job (a server that sent the rest as the
      // client read could finish first: loopback buffers take megabytes).
      for (const res of held.splice(0)) {
        res.writeHead(200, { "content-length": String(8 * 1_048_576) });
        res.write(Buffer.alloc(1_048_576));
      }
    },
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

function jobS3() {
  return createJobS3({
    jobId: "job-1",
    s3Config: undefined,
    // A store is configured (ctx.s3 needs one) but URL downloads never talk to it.
    bucket: { endpointUrl: "https://s3.example.com/b", accessKeyId: "a", secretAccessKey: "s" },
    signal: new AbortController().signal,
    log: createLogger({ platform: true, level: "silent" }),
    allowPrivateAddresses: true,
    tmpRoot: root,
  });
}

describe("a job's end ends its downloads (issue 32)", () => {
  it("aborts a download still waiting for its answer, waits for it, and leaves no folder behind", async () => {
    const s = await slowServer();
    try {
      const s3 = jobS3();
      const download = s3.download(s.url).then(
        () => "finished",
        (err: Error) => err.name,
      );
      await waitFor("the download to reach the server", () => s.state.arrived === 1);
      const cleanup = s3.cleanup();
      s.release();
      await cleanup;
      expect(await download).toBe("AbortError");
      // Whatever the download would still have done, it is over: no folder, no file.
      expect(await readdir(root)).toEqual([]);
    } finally {
      s.close();
    }
  });

  it("aborts a download writing its file, and removes the folder after it stopped", async () => {
    const s = await slowServer();
    try {
      const s3 = jobS3();
      const first = s3.download(s.url).catch((err: Error) => err.name);
      await waitFor("the download to reach the server", () => s.state.arrived === 1);
      s.release();
      await waitFor("the folder to exist", () => readdirSync(root).length === 1);
      await s3.cleanup();
      expect(await first).toBe("AbortError");
      expect(await readdir(root)).toEqual([]);
      await waitFor("the server to see the connection cut", () => s.state.cut === 1);
    } finally {
      s.close();
    }
  });

  it("closes a { to: 'stream' } download the handler never read", async () => {
    const s = await slowServer();
    try {
      const s3 = jobS3();
      const pending = s3.download(s.url, { to: "stream" });
      await waitFor("the download to reach the server", () => s.state.arrived === 1);
      s.release();
      const got = await pending;
      expect("stream" in got).toBe(true);
      await s3.cleanup();
      await waitFor("the server to see the connection closed", () => s.state.cut === 1, 5_000);
    } finally {
      s.close();
    }
  });
});
