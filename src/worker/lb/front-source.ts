/**
 * The front thread's code (front-thread.ts starts it with `eval`, so a bundle needs no file of its
 * own for it): it binds `PORT` (and `PORT_HEALTH` when it differs), answers the health path from
 * the state the main thread last sent, refuses what the main thread should never see (bodies over
 * the limit by their length, requests before ready or after stopping), and passes every other
 * request to the main thread's request server over a loopback connection, both ways as a stream.
 * A client that hangs up closes its loopback request, which the request server sees as its own
 * hang-up. Only Node's own modules: it runs where no package can be loaded.
 *
 * Messages in: `{type: "inner", port}`, `{type: "state", state}`, `{type: "close"}`.
 * Messages out: `{type: "listening", port, healthPort}`, `{type: "error", code, message}`, `{type: "closed"}`.
 */
export const FRONT_THREAD_SOURCE = `
"use strict";
const { parentPort, workerData } = require("node:worker_threads");
const http = require("node:http");
const { pipeline } = require("node:stream");
const { port, healthPort, host, healthPath, maxBodyBytes } = workerData;
let state = "starting";
let innerPort;
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256 });
const HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"]);

function pathOf(url) {
  const q = url.indexOf("?");
  return q === -1 ? url : url.slice(0, q);
}

function send(res, status, body, extra) {
  if (res.headersSent) { res.destroy(); return; }
  const text = JSON.stringify(body);
  res.writeHead(status, Object.assign({ "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" }, extra || {}));
  res.end(text);
}

function health(req, res) {
  if (state === "starting") { res.writeHead(204, { "cache-control": "no-store" }); res.end(); return; }
  const status = state === "ready" ? 200 : 503;
  const text = JSON.stringify({ status: state });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
  res.end(req.method === "HEAD" ? undefined : text);
}

function isHealth(req) {
  return (req.method === "GET" || req.method === "HEAD") && pathOf(req.url || "/") === healthPath;
}

// The answer goes out at once, whole (its length is in its headers, so a client reads all of it),
// but the connection is ended only once the client has sent its body, which is read and dropped
// (never kept): a client still sending reads the 413 rather than a broken pipe. One that sends on
// past 10 s is cut off.
function tooLarge(req, res, received) {
  const text = JSON.stringify({ error: "the request body is larger than the limit of " + maxBodyBytes + " bytes (30 MB)" + (received === undefined ? "" : ": " + received + " bytes read") });
  res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store", connection: "close" });
  res.write(text);
  req.resume();
  const timer = setTimeout(() => req.socket.destroy(), 10000);
  timer.unref();
  const finish = () => { clearTimeout(timer); res.end(); };
  req.once("end", finish);
  req.once("close", finish);
}

function forward(req, res) {
  const headers = {};
  for (const [name, value] of Object.entries(req.headers)) if (!HOP.has(name)) headers[name] = value;
  const up = http.request({ host: "127.0.0.1", port: innerPort, method: req.method, path: req.url, headers, agent });
  let received = 0;
  let refused = false;
  up.on("response", (answer) => {
    const out = {};
    for (const [name, value] of Object.entries(answer.headers)) if (!HOP.has(name)) out[name] = value;
    res.writeHead(answer.statusCode || 502, out);
    if (typeof res.flushHeaders === "function") res.flushHeaders();
    pipeline(answer, res, () => {});
  });
  up.on("error", () => {
    if (refused) return;
    if (!res.headersSent) send(res, 502, { error: "the worker's request server did not answer" });
    else res.destroy();
  });
  req.on("data", (chunk) => {
    if (refused) return;
    received += chunk.length;
    if (received > maxBodyBytes) {
      refused = true;
      if (res.headersSent) {
        // The request server answered already (its own limit): let that answer finish, drop the rest.
        up.end();
        req.resume();
        return;
      }
      up.destroy();
      tooLarge(req, res, received);
      return;
    }
    if (!up.write(chunk)) { req.pause(); up.once("drain", () => req.resume()); }
  });
  req.on("end", () => { if (!refused) up.end(); });
  req.on("error", () => up.destroy());
  // The client went away before its answer was complete: the request server sees the same.
  res.on("close", () => { if (!res.writableFinished) up.destroy(); });
}

function serve(req, res) {
  if (isHealth(req)) return health(req, res);
  if (state === "starting" || innerPort === undefined) return send(res, 503, { error: "the worker is starting" }, { "retry-after": "1" });
  if (state !== "ready") return send(res, 503, { error: "the worker is " + (state === "unhealthy" ? "unhealthy" : "stopping") }, { connection: "close" });
  const length = Number(req.headers["content-length"]);
  if (Number.isFinite(length) && length > maxBodyBytes) return tooLarge(req, res, undefined);
  forward(req, res);
}

function onlyHealth(req, res) {
  if (isHealth(req)) return health(req, res);
  send(res, 404, { error: "this port answers " + healthPath + " only" });
}

const servers = [];
function open(portNumber, listener) {
  return new Promise((resolve, reject) => {
    const server = http.createServer(listener);
    server.requestTimeout = 0;
    server.on("error", reject);
    server.listen({ port: portNumber, host }, () => {
      server.off("error", reject);
      server.on("error", () => {});
      servers.push(server);
      resolve(server.address().port);
    });
  });
}

(async () => {
  const bound = await open(port, serve);
  const boundHealth = healthPort === port ? bound : await open(healthPort, onlyHealth);
  parentPort.postMessage({ type: "listening", port: bound, healthPort: boundHealth });
})().catch((err) => {
  for (const server of servers) server.close();
  parentPort.postMessage({ type: "error", code: (err && err.code) || "", message: (err && err.message) || String(err) });
});

parentPort.on("message", (message) => {
  if (message.type === "inner") innerPort = message.port;
  else if (message.type === "state") state = message.state;
  else if (message.type === "close") {
    let left = servers.length;
    const done = () => { if (--left <= 0) { agent.destroy(); parentPort.postMessage({ type: "closed" }); parentPort.close(); } };
    if (left === 0) { left = 1; done(); return; }
    for (const server of servers) { server.close(done); server.closeIdleConnections(); }
    // A connection still open a second later (a client that never finishes its request) is cut.
    setTimeout(() => { for (const server of servers) server.closeAllConnections(); }, 1000).unref();
  }
});
`;
