import { connect, createServer, type Server, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { defineHandler, type HandlerDefinition } from "../../src/index.js";
import type { S3Config } from "../../src/protocol/index.js";
import stopAfterResultThread, { definition } from "../fixtures/stop-after-result.js";
import { THREAD_START_MS, THREAD_TEST_MS } from "../support/thread-allowance.js";
import { useS3rver } from "../support/use-s3rver.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * A job-stop that arrives after the handler returned, while its output is still being offloaded
 * to S3 (issue 12, bug 2): the job's handle is inert by then, so nothing is aborted or hard-stopped,
 * in-process or on an isolation thread that already runs the next job. The store is s3rver behind
 * a gate: a TCP relay that holds every connection until the test opens it, so the offload is
 * slow for exactly as long as the test needs.
 */
const BUCKET = "runlet-stop";
const s3rver = useS3rver(BUCKET);

/** A TCP relay to s3rver that holds connections until open() is called. */
async function gate(): Promise<{ endpoint: string; held: () => number; open: () => void } & AsyncDisposable> {
  const target = new URL(s3rver.endpoint);
  const waiting: Socket[] = [];
  const sockets = new Set<Socket>();
  let isOpen = false;
  let held = 0;
  const relay = (client: Socket): void => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.pause();
    held += 1;
    if (isOpen) relay(client);
    else waiting.push(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    held: () => held,
    open() {
      isOpen = true;
      for (const client of waiting.splice(0)) relay(client);
    },
    async [Symbol.asyncDispose]() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function s3Config(endpointUrl: string): S3Config {
  return { accessId: "S3RVER", accessSecret: "S3RVER", bucketName: BUCKET, endpointUrl };
}

const THREAD_MODULE = fileURLToPath(new URL("../fixtures/stop-after-result.ts", import.meta.url));

async function stopDuringOffload(handler: HandlerDefinition, options: { handlerModule?: string }) {
  // Long polls held for a minute: no take comes back empty while the test runs, so the take
  // loop never pauses on the ManualClock below (it counts an empty answer as instant there).
  await using h = memoryHarness(60_000);
  await using store = await gate();
  const sink = logSink();
  // The hard-stop grace runs on this clock: the test moves it past the grace instead of sleeping.
  const clock = new ManualClock();
  // s3Config names a store on loopback: allowed only with the opt-in.
  await using w = await workerFor(h, handler, {
    sink,
    clock,
    maxResultBytes: 2_000,
    allowPrivateAddresses: true,
    ...options,
  });
  const big = h.enqueue("local", { input: { mode: "big" }, s3Config: s3Config(store.endpoint) });
  // A thread loads tsx, zod and the handler first.
  await waitFor("the offload to reach the store", () => store.held() > 0, THREAD_START_MS);
  // The next job starts while the first one is still offloading (on the thread the first one freed).
  const next = h.enqueue("local", { input: { mode: "wait", ms: 1_500 } });
  await waitFor("the next job to run", () => h.job(next)?.status === "IN_PROGRESS");
  h.stopJob(big);
  await waitFor("the worker to take the stop", () =>
    sink.lines.some((l) => l["requestId"] === big && String(l["message"]).startsWith("the platform asked")),
  );
  // Far past the 100 ms hard-stop grace before the store answers: a hard stop armed by this
  // job-stop would fire within this step, synchronously.
  clock.advance(10 * definition.hardStopGraceMs);
  store.open();
  const nextJob = await h.waitForJob(next);
  expect(nextJob.status).toBe("COMPLETED");
  expect(nextJob.output).toEqual({ aborted: false });
  expect(h.job(big)!.status).toBe("CANCELLED");
  expect(sink.lines.filter((l) => String(l["message"]).includes("hard-stopping"))).toEqual([]);
  // The worker serves on: neither a runaway stop nor a killed thread.
  const after = await h.waitForJob(h.enqueue("local", { input: { mode: "wait", ms: 0 } }));
  expect(after.output).toEqual({ aborted: false });
  // The stopped job leaves once its offload, let through at last, is done.
  await waitFor("the stopped job to leave the worker", () => !w.jobIds.includes(big), 30_000);
}

describe("a job-stop after the handler returned, during a slow S3 offload", () => {
  it(
    "in-process: hard-stops nothing and the worker serves on",
    async () => {
      await stopDuringOffload(defineHandler(definition), {});
    },
    THREAD_TEST_MS,
  );

  it(
    'isolation: "thread": does not abort or kill the next job on the thread the stopped job freed',
    async () => {
      await stopDuringOffload(stopAfterResultThread, { handlerModule: THREAD_MODULE });
    },
    THREAD_TEST_MS,
  );
});
