/**
 * The floor of the per-job overhead, measured in the same bench run: the same four messages a job
 * makes through runlet (the client's `/run`, the answer to a held job-take, the job-done post, the
 * answer to a held status wait) between a bare `node:http` relay in the bench process and a bare
 * worker process (bench/relay-worker.ts), with the same client. No routing, auth, validation,
 * logging, retry policy or job store: what this machine's loopback and process wake-ups cost.
 */
import { spawn } from "node:child_process";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Agent, request } from "undici";
import { ROOT } from "./worker-process.js";

/** One `/run` then a wait for the result; ms. The same steps runlet's overhead figure times. */
export type RoundTrip = (n: number) => Promise<number>;

/** A keep-alive undici client for the overhead figures (fetch's own machinery would dominate them). */
export function overheadClient(): Agent {
  return new Agent({ connections: 2 });
}

/** `POST <base>/run`, then `GET <waitPath(id)>`, both read to the end; returns the ms and the record. */
export async function timedRoundTrip(
  dispatcher: Agent,
  base: string,
  headers: Record<string, string>,
  n: number,
  waitPath: (id: string) => string,
): Promise<{ ms: number; record: Record<string, unknown> }> {
  const started = performance.now();
  const run = await request(`${base}/run`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ input: { n } }),
    dispatcher,
  });
  const { id } = (await run.body.json()) as { id: string };
  const res = await request(`${base}${waitPath(id)}`, { headers, dispatcher });
  const record = (await res.body.json()) as Record<string, unknown>;
  return { ms: performance.now() - started, record };
}

/** Runs `warmup` + `jobs` round trips through the bare relay and returns the timed ones, ms. */
export async function measureRelayFloor(jobs: number, warmup = 20): Promise<number[]> {
  let next = 0;
  const queued: string[] = [];
  const takers: ServerResponse[] = [];
  const results = new Map<string, string>();
  const waiting = new Map<string, ServerResponse>();
  const send = (res: ServerResponse, status: number, body: string): void => {
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  };
  let stopping = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () => {
      const url = req.url ?? "";
      if (url === "/run") {
        const id = `job-${next++}`;
        const job = JSON.stringify({
          id,
          input: (JSON.parse(Buffer.concat(chunks).toString()) as { input: unknown }).input,
        });
        const taker = takers.shift();
        if (taker === undefined) queued.push(job);
        else send(taker, 200, job);
        send(res, 200, JSON.stringify({ id, status: "IN_QUEUE" }));
      } else if (url === "/take") {
        const job = queued.shift();
        if (stopping) send(res, 204, "");
        else if (job === undefined) takers.push(res);
        else send(res, 200, job);
      } else if (url.startsWith("/done/")) {
        const id = url.slice("/done/".length);
        const output = (JSON.parse(Buffer.concat(chunks).toString()) as { output: unknown }).output;
        const record = JSON.stringify({ id, status: "COMPLETED", output });
        const waiter = waiting.get(id);
        waiting.delete(id);
        if (waiter === undefined) results.set(id, record);
        else send(waiter, 200, record);
        send(res, 200, "{}");
      } else if (url.startsWith("/status/")) {
        const id = url.slice("/status/".length);
        const record = results.get(id);
        results.delete(id);
        if (record === undefined) waiting.set(id, res);
        else send(res, 200, record);
      } else send(res, 404, "{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const worker = spawn(
    process.execPath,
    [join(ROOT, "bin", "run-ts.mjs"), join(ROOT, "bench", "relay-worker.ts"), base],
    {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let err = "";
  worker.stderr.setEncoding("utf8").on("data", (text: string) => {
    err = (err + text).slice(-4_096);
  });
  const exited = new Promise<number | null>((resolve) => worker.once("exit", resolve));
  const dispatcher = overheadClient();
  try {
    const times: number[] = [];
    for (let i = 0; i < warmup + jobs; i++) {
      const trip = await Promise.race([
        timedRoundTrip(dispatcher, base, {}, i, (id) => `/status/${id}`),
        exited.then((code) => {
          throw new Error(`the relay's bare worker exited ${code}:\n${err}`);
        }),
      ]);
      if (i >= warmup) times.push(trip.ms);
    }
    return times;
  } finally {
    stopping = true;
    for (const taker of takers.splice(0)) send(taker, 204, "");
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    if (worker.exitCode === null) worker.kill("SIGKILL");
    await dispatcher.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
