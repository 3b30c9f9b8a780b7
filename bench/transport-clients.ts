/**
 * What each of the transport's clients costs (issue 43, item 4; docs/benchmarks.md, "One
 * transport (issue 43)"): CPU and RSS of loading node:http, undici's Pool file and undici's public entry, each
 * in a fresh process; and client CPU per request of the transport on node:http, on undici's Pool
 * (dispatch, collecting the body), and of undici's `request()` for reference, posting a job-done
 * body to a bare node:http server in another process, at 64 and at 1 request in flight.
 *
 *   node bin/run-ts.mjs bench/transport-clients.ts [--requests 20000] [--rounds 3]
 *
 * Prints one JSON line per figure: medians over the rounds.
 */
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { parseArgs, promisify } from "node:util";
import { median } from "./stats.js";
import { ROOT } from "./worker-process.js";

const run = promisify(execFile);
const { values } = parseArgs({ options: { requests: { type: "string" }, rounds: { type: "string" } } });
const requests = Number(values.requests ?? "20000");
const rounds = Number(values.rounds ?? "3");

const LOAD = `
const which = process.argv[1];
const c0 = process.cpuUsage(); const r0 = process.memoryUsage().rss;
if (which === "node:http") process.getBuiltinModule("node:http"); else require(which);
const c = process.cpuUsage(c0);
process.stdout.write(JSON.stringify({ cpuMs: (c.user + c.system) / 1000, rssMiB: (process.memoryUsage().rss - r0) / 1048576 }));
`;

const CLIENT = `
const [variant, port, inflight, count] = process.argv.slice(1);
const url = "http://127.0.0.1:" + port + "/v2/e/job-done/pod/job-1?gpu=LOCAL&isStream=false";
const body = JSON.stringify({ output: { ok: 1, n: 12345 } });
let send;
if (variant === "request") {
  const { Pool } = await import("undici");
  const pool = new Pool("http://127.0.0.1:" + port, { connections: 64 });
  const path = new URL(url).pathname + new URL(url).search;
  send = async () => { const r = await pool.request({ path, method: "POST", headers: { "content-type": "application/json" }, body }); await r.body.text(); return r.statusCode; };
} else {
  const { HttpTransport } = await import("./dist/http/transport.js");
  const { loadUndiciClient } = await import("./dist/http/undici-client.js");
  const t = new HttpTransport({ credential: "key", userAgent: "bench", loadFastClient: loadUndiciClient });
  if (variant === "undici" && !(await t.warmUp())) throw new Error("no undici");
  send = async () => (await t.request("POST", url, { body, headers: { "content-type": "application/json" } })).status;
}
const loop = async (n) => { let next = 0; await Promise.all(Array.from({ length: Number(inflight) }, async () => { while (next < n) { next++; if ((await send()) !== 200) throw new Error("status"); } })); };
await loop(2000);
const c0 = process.cpuUsage(); const t0 = performance.now();
await loop(Number(count));
const ms = performance.now() - t0; const c = process.cpuUsage(c0);
process.stdout.write(JSON.stringify({ perSecond: Number(count) / (ms / 1000), cpuUs: (c.user + c.system) / Number(count) }));
process.exit(0);
`;

const SERVER = `
const { createServer } = require("node:http");
const s = createServer((req, res) => { req.resume(); req.on("end", () => { res.writeHead(200, { "content-type": "application/json", "content-length": "11" }); res.end('{"ok":true}'); }); });
s.keepAliveTimeout = 60000;
s.listen(0, "127.0.0.1", () => process.stdout.write(String(s.address().port) + "\\n"));
`;

const loads = new Map<string, { cpuMs: number[]; rssMiB: number[] }>();
for (let r = 0; r < rounds; r++) {
  for (const which of ["node:http", "undici/lib/dispatcher/pool.js", "undici"]) {
    const { stdout } = await run(process.execPath, ["-e", LOAD, which], { cwd: ROOT });
    const got = JSON.parse(stdout) as { cpuMs: number; rssMiB: number };
    const f = loads.get(which) ?? { cpuMs: [], rssMiB: [] };
    f.cpuMs.push(got.cpuMs);
    f.rssMiB.push(got.rssMiB);
    loads.set(which, f);
  }
}
for (const [which, f] of loads) {
  process.stdout.write(
    `${JSON.stringify({ figure: "load", module: which, cpuMs: Number(median(f.cpuMs).toFixed(1)), rssMiB: Number(median(f.rssMiB).toFixed(1)), rounds })}\n`,
  );
}

const server = spawn(process.execPath, ["-e", SERVER], { stdio: ["ignore", "pipe", "inherit"] });
const [portLine] = (await once(server.stdout!, "data")) as [Buffer];
const port = portLine.toString().trim();
try {
  for (const inflight of [64, 1]) {
    const per = new Map<string, { perSecond: number[]; cpuUs: number[] }>();
    for (let r = 0; r < rounds; r++) {
      for (const variant of ["node", "undici", "request"]) {
        const { stdout } = await run(
          process.execPath,
          ["--input-type=module", "-e", CLIENT, variant, port, String(inflight), String(requests)],
          { cwd: ROOT },
        );
        const got = JSON.parse(stdout) as { perSecond: number; cpuUs: number };
        const f = per.get(variant) ?? { perSecond: [], cpuUs: [] };
        f.perSecond.push(got.perSecond);
        f.cpuUs.push(got.cpuUs);
        per.set(variant, f);
      }
    }
    for (const [variant, f] of per) {
      process.stdout.write(
        `${JSON.stringify({ figure: "request", client: variant === "node" ? "transport on node:http" : variant === "undici" ? "transport on undici's Pool" : "undici request()", inflight, perSecond: Math.round(median(f.perSecond)), clientCpuUsPerRequest: Number(median(f.cpuUs).toFixed(1)), requests, rounds })}\n`,
      );
    }
  }
} finally {
  server.kill();
}
