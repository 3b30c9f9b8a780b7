import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WORKER_NODE_FLAGS } from "../../src/cli/dockerfile.js";
import type { BenchOptions } from "../options.js";
import { type Figure, figure, repeat } from "../stats.js";
import { ROOT, spawnNode, type WorkerProcess } from "../worker-process.js";

/**
 * The load-balancing path (docs/load-balancing.md): requests/s through a `runlet start --mode lb`
 * worker running the trivial handler at concurrency 1, 8 and 64, against its ceiling — a bare
 * node:http server doing the same work (read the JSON body, parse it, answer the /runsync shape)
 * measured right after with the same client; and the bundled echo worker's cold start as the
 * platform measures it: spawn → first 204 from health, and first 204 → first 200.
 */

/** A free loopback port (bound and released at once). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** One POST over `agent`; resolves with the status once the answer is read. */
function postOnce(agent: Agent, port: number, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/runsync",
        method: "POST",
        agent,
        headers: { "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** `requests` POSTs with `concurrency` in flight; requests/s. Throws on any non-200. */
async function load(port: number, requests: number, concurrency: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < requests) {
          next += 1;
          const status = await postOnce(agent, port, `{"input":{"n":${next}}}`);
          if (status !== 200) throw new Error(`the load-balancing bench got ${status}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return requests / ((performance.now() - started) / 1000);
}

/** The ceiling: node:http reading the body, parsing it, answering what the worker answers. */
async function startBareServer(): Promise<{ port: number; close(): Promise<void> }> {
  let n = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const started = performance.now();
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { input: { n?: unknown } };
      n += 1;
      const text = JSON.stringify({
        id: `bare-${n}`,
        status: "COMPLETED",
        output: { n: body.input.n ?? null, handlerMs: performance.now() - started },
        executionTime: 0,
      });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polls health on `port` until it answers `want` (fresh connections, every 2 ms); the time it did. */
async function healthAt(port: number, want: number, until: number): Promise<number> {
  for (;;) {
    if (performance.now() > until) throw new Error(`health on port ${port} never answered ${want}`);
    const status = await new Promise<number>((resolve) => {
      const req = request({ host: "127.0.0.1", port, path: "/ping", agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", () => resolve(0));
      req.end();
    });
    if (status === want || (want === 204 && status === 200)) return performance.now();
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Builds examples/echo into a temporary folder; its dist/worker.mjs. */
async function buildEcho(tmp: string): Promise<string> {
  const dir = join(tmp, "echo");
  await mkdir(dir);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin", "runlet.mjs"), "build", join(ROOT, "examples", "echo", "handler.ts"), "--no-verify"],
      { cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
    );
    let err = "";
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`runlet build failed: ${err}`))));
  });
  return join(dir, "dist", "worker.mjs");
}

/** The load-balancing figures. */
export async function measureLoadBalancing(options: BenchOptions): Promise<Figure[]> {
  const { levels, requests, coldStarts } = options.loadBalancing;
  const figures: Figure[] = [];
  for (const concurrency of levels) {
    const port = await freePort();
    const worker: WorkerProcess = spawnNode(
      "bin/runlet.mjs",
      ["start", "bench/handlers/trivial.ts"],
      {
        RUNLET_MODE: "lb",
        PORT: String(port),
        RUNLET_LB_HOST: "127.0.0.1",
        BENCH_CONCURRENCY: String(concurrency),
      },
      WORKER_NODE_FLAGS,
    );
    const bare = await startBareServer();
    try {
      await healthAt(port, 200, performance.now() + 60_000);
      // Warm both sides (JIT, connections) before measuring.
      await load(port, Math.min(requests, 500), concurrency);
      await load(bare.port, Math.min(requests, 500), concurrency);
      const runs = await repeat(options.repetitions, async () => {
        const runlet = await load(port, requests, concurrency);
        const ceiling = await load(bare.port, requests, concurrency);
        return { runlet, ceiling };
      });
      const id = `lb.c${concurrency}`;
      figures.push(
        figure(
          id,
          `load-balancing requests/s at ${concurrency} in flight (runlet start --mode lb, trivial handler)`,
          "req/s",
          runs.map((r) => r.runlet),
        ),
        figure(
          `${id}.ceiling`,
          `bare node:http server doing the same work, ${concurrency} in flight`,
          "req/s",
          runs.map((r) => r.ceiling),
        ),
        figure(
          `${id}.ratio`,
          "runlet's requests/s over the ceiling's",
          "x",
          runs.map((r) => r.runlet / r.ceiling),
        ),
      );
    } finally {
      await bare.close();
      await worker.stop();
    }
  }
  if (coldStarts > 0) {
    const tmp = await mkdtemp(join(tmpdir(), "runlet-bench-lb-"));
    try {
      const bundle = await buildEcho(tmp);
      const starts = await repeat(coldStarts, async () => {
        const port = await freePort();
        const spawned = performance.now();
        const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, bundle], {
          cwd: join(tmp, "echo"),
          env: {
            ...process.env,
            PORT: String(port),
            RUNLET_LB_HOST: "127.0.0.1",
            RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
            RUNPOD_SKIP_GPU_CHECK: "true",
          },
          stdio: ["ignore", "ignore", "ignore"],
        });
        const exited = new Promise((resolve) => child.once("exit", resolve));
        try {
          const until = performance.now() + 60_000;
          const first204 = await healthAt(port, 204, until);
          const first200 = await healthAt(port, 200, until);
          return { toFirst204: first204 - spawned, coldStart: first200 - first204 };
        } finally {
          child.kill("SIGTERM");
          await exited;
        }
      });
      figures.push(
        figure(
          "lb.start.firstHealth",
          "bundled echo worker: spawn → first health answer (204 or 200)",
          "ms",
          starts.map((s) => s.toFirst204),
        ),
        figure(
          "lb.start.coldStart",
          "bundled echo worker: first 204 → first 200 (the platform's cold start)",
          "ms",
          starts.map((s) => s.coldStart),
        ),
      );
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  return figures;
}
