/**
 * The front thread's code (front-thread.ts starts it with `eval`, so a bundle needs no file of its
 * own for it): it binds `PORT` (and `PORT_HEALTH` when it differs), answers the health path from
 * the state the main thread last sent, refuses what the main thread should never see (bodies over
 * the limit by their length or as they are read, requests before ready or after stopping), and
 * parses every other request once: it posts it, body read whole, to the main thread's request
 * server over a MessagePort (`requests`, front-messages.ts) and writes the answer that comes back
 * (whole, or as a stream of chunks). A client that hangs up before its answer is complete is an
 * abort message. Only Node's own modules: it runs where no package can be loaded.
 *
 * Messages in: `{type: "serving"}`, `{type: "state", state}`, `{type: "close"}`.
 * Messages out: `{type: "listening", port, healthPort}`, `{type: "error", code, message}`, `{type: "closed"}`.
 */
export const FRONT_THREAD_SOURCE = `
"use strict";
const { parentPort, workerData } = require("node:worker_threads");
const http = require("node:http");
const { port, healthPort, host, healthPath, maxBodyBytes, requests } = workerData;
let state = "starting";
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

// Requests posted to the main thread and not answered whole yet, by id.
const pending = new Map();
let nextId = 0;
let serving = false;

// Answer bodies come as strings, or as bytes when the main thread transferred them.
function bytesOf(data) {
  return data === undefined || typeof data === "string" ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function headersOf(headers) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP.has(name)) out[name] = value;
  return out;
}

// Reads the body whole (refused with 413 as soon as it passes the limit), then posts the request to
// the main thread: method, URL, headers, and the body's bytes in an ArrayBuffer of their own,
// transferred. A client that hangs up before its answer is complete is an abort message.
function forward(req, res) {
  const id = ++nextId;
  const chunks = [];
  let received = 0;
  let refused = false;
  let gone = false;
  res.on("close", () => {
    gone = true;
    if (pending.delete(id)) requests.postMessage({ type: "abort", id });
  });
  req.on("data", (chunk) => {
    if (refused) return;
    received += chunk.length;
    if (received > maxBodyBytes) {
      refused = true;
      chunks.length = 0;
      tooLarge(req, res, received);
      return;
    }
    chunks.push(chunk);
  });
  // A client that goes away mid-body: its request is never posted (res's close says so too).
  req.on("error", () => { gone = true; });
  req.on("end", () => {
    if (refused || gone) return;
    if (!serving) return send(res, 503, { error: "the worker is stopping" }, { connection: "close" });
    let body;
    const transfer = [];
    if (received > 0) {
      const buffer = new ArrayBuffer(received);
      body = new Uint8Array(buffer);
      let at = 0;
      for (const chunk of chunks) { body.set(chunk, at); at += chunk.length; }
      transfer.push(buffer);
    }
    chunks.length = 0;
    pending.set(id, res);
    requests.postMessage({ type: "request", id, method: req.method, url: req.url, headers: req.headers, body }, transfer);
  });
}

// A message from the main thread about one request's answer.
function answer(message) {
  const res = pending.get(message.id);
  if (res === undefined) return;
  switch (message.type) {
    case "whole":
      pending.delete(message.id);
      res.writeHead(message.status, headersOf(message.headers));
      res.end(bytesOf(message.body));
      return;
    case "head":
      res.writeHead(message.status, headersOf(message.headers));
      res.flushHeaders();
      return;
    case "chunk": {
      const written = res.write(bytesOf(message.data));
      if (!message.ack) return;
      // The main thread waits for this before it writes more: its window of unread bytes is full.
      const ack = () => { res.off("drain", ack); res.off("close", ack); requests.postMessage({ type: "ack", id: message.id }); };
      if (written) ack();
      else { res.on("drain", ack); res.on("close", ack); }
      return;
    }
    case "end":
      pending.delete(message.id);
      res.end(bytesOf(message.data));
      return;
    case "cut":
      pending.delete(message.id);
      res.destroy();
      return;
  }
}

requests.on("message", answer);
// The main thread's end closed: what is still open can never be answered.
requests.on("close", () => {
  serving = false;
  for (const res of pending.values()) { if (!res.headersSent) send(res, 502, { error: "the worker's request server did not answer" }); else res.destroy(); }
  pending.clear();
});

function serve(req, res) {
  if (isHealth(req)) return health(req, res);
  if (state === "starting" || !serving) return send(res, 503, { error: "the worker is starting" }, { "retry-after": "1" });
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
  if (message.type === "serving") serving = true;
  else if (message.type === "state") state = message.state;
  else if (message.type === "close") {
    let left = servers.length;
    const done = () => { if (--left <= 0) { requests.close(); parentPort.postMessage({ type: "closed" }); parentPort.close(); } };
    if (left === 0) { left = 1; done(); return; }
    for (const server of servers) { server.close(done); server.closeIdleConnections(); }
    // A connection still open a second later (a client that never finishes its request) is cut.
    setTimeout(() => { for (const server of servers) server.closeAllConnections(); }, 1000).unref();
  }
});
`;
