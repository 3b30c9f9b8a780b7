import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runNode } from "../support/run-cli.js";

// The worker's HTTP client (PlatformHttp) speaks to an https platform through node:https: a real
// TLS server on loopback with a test certificate (test/fixtures/tls), the client in a child
// process that trusts it through NODE_EXTRA_CA_CERTS (read only at a process's start).

const TLS = fileURLToPath(new URL("../fixtures/tls/", import.meta.url));
const CLIENT = fileURLToPath(new URL("../../dist/worker/platform/platform-http.js", import.meta.url));

let server: Server;
let origin: string;
const seen: Array<{ method: string; url: string; authorization?: string; length?: string; body: string }> =
  [];

beforeAll(async () => {
  server = createServer(
    { key: readFileSync(`${TLS}key.pem`), cert: readFileSync(`${TLS}cert.pem`) },
    (req, res) => {
      let body = "";
      req.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      req.on("end", () => {
        seen.push({
          method: req.method ?? "",
          url: req.url ?? "",
          ...(req.headers.authorization === undefined ? {} : { authorization: req.headers.authorization }),
          ...(req.headers["content-length"] === undefined ? {} : { length: req.headers["content-length"] }),
          body,
        });
        if (req.url === "/moved") {
          res.writeHead(307, { location: "/done" }).end();
          return;
        }
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ got: Buffer.byteLength(body) }));
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Runs a GET and a redirected POST through PlatformHttp in a child Node; returns its JSON lines. */
function runClient(extraEnv: Record<string, string>) {
  const script = `
    import { PlatformHttp } from ${JSON.stringify(CLIENT)};
    const http = new PlatformHttp("key-1");
    try {
      const a = await http.get(${JSON.stringify("ORIGIN/take")}.replace("ORIGIN", process.env.ORIGIN));
      const b = await http.postJson(${JSON.stringify("ORIGIN/moved")}.replace("ORIGIN", process.env.ORIGIN), '{"output":"é"}', { jobId: "j1" });
      console.log(JSON.stringify({ a: [a.status, a.text], b: [b.status, b.text] }));
    } catch (err) {
      console.log(JSON.stringify({ error: String(err?.code ?? err?.cause?.code ?? err) }));
    } finally {
      await http.close();
    }`;
  return runNode(["--input-type=module", "-e", script], {
    env: { PATH: process.env["PATH"] ?? "", ORIGIN: origin, ...extraEnv },
  });
}

describe("the worker's HTTP client against an https platform", () => {
  it("gets and posts over TLS, following a redirect with the body and the key", async () => {
    seen.length = 0;
    const r = await runClient({ NODE_EXTRA_CA_CERTS: `${TLS}cert.pem` });
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout)).toEqual({ a: [200, '{"got":0}'], b: [200, '{"got":15}'] });
    expect(seen).toEqual([
      { method: "GET", url: "/take", authorization: "key-1", body: "" },
      { method: "POST", url: "/moved", authorization: "key-1", length: "15", body: '{"output":"é"}' },
      { method: "POST", url: "/done", authorization: "key-1", length: "15", body: '{"output":"é"}' },
    ]);
  });

  it("refuses a server whose certificate it does not trust", async () => {
    seen.length = 0;
    const r = await runClient({});
    expect(JSON.parse(r.stdout)).toEqual({ error: "DEPTH_ZERO_SELF_SIGNED_CERT" });
    expect(seen).toEqual([]);
  });
});
