import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { checkWarmCacheOptions } from "../../src/cache/cache-options.js";
import { createClient } from "../../src/client/index.js";
import { MAX_TIMER_MS } from "../../src/duration.js";
import { defineHandler } from "../../src/handler/index.js";
import { startHarness } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { createJobS3 } from "../../src/s3/index.js";
import { checkSidecars } from "../../src/sidecar/options.js";
import { resolveWorkerConfig } from "../../src/worker/config.js";
import { jobTimeoutMs } from "../../src/worker/job/job-clock.js";

// Issue 42, item 4: a Node timer longer than 2^31−1 ms fires after 1 ms, so a duration option of
// 30 days ended its wait at once, blaming a limit never reached. Every duration runlet accepts is
// refused above MAX_TIMER_MS where options are checked, by one check, naming the option and the limit.

const THIRTY_DAYS = 2_592_000_000;
const LIMIT = `at most ${MAX_TIMER_MS} ms (2^31−1, about 24.8 days: the longest timer Node keeps)`;
const platform = { RUNPOD_WEBHOOK_GET_JOB: "http://x/take", RUNPOD_WEBHOOK_POST_OUTPUT: "http://x/done" };

async function errorOf(fn: () => unknown): Promise<{ code?: string; message: string }> {
  try {
    await fn();
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error("expected a throw");
}

describe("durations above 2^31−1 ms (issue 42, item 4)", () => {
  it("MAX_TIMER_MS is the longest delay a Node timer keeps", () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
  });

  it.each([
    "executionTimeoutMs",
    "streamCoalesceMs",
    "hardStopGraceMs",
    "healthCheckIntervalMs",
    "healthCheckTimeoutMs",
    "setupTimeoutMs",
  ])(
    "defineHandler refuses %s of 30 days, naming it and the limit, and takes the limit itself",
    async (name) => {
      expect(await errorOf(() => defineHandler({ handler: () => 1, [name]: THIRTY_DAYS }))).toMatchObject({
        code: "RUNLET_HANDLER_INVALID",
        message: `defineHandler: ${name} must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
      const def = defineHandler({ handler: () => 1, [name]: MAX_TIMER_MS }) as unknown as Record<
        string,
        unknown
      >;
      expect(def[name]).toBe(MAX_TIMER_MS);
    },
  );

  it.each(["readyTimeoutMs", "readyIntervalMs", "stopGraceMs"])(
    "a sidecar's %s of 30 days is refused",
    async (name) => {
      const sidecar = { command: ["server"], ready: { port: 8080 }, [name]: THIRTY_DAYS };
      expect(await errorOf(() => checkSidecars(sidecar))).toMatchObject({
        code: "RUNLET_HANDLER_INVALID",
        message: `defineHandler: sidecar: ${name} must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
      expect(checkSidecars({ ...sidecar, [name]: MAX_TIMER_MS })[0]).toMatchObject({ [name]: MAX_TIMER_MS });
    },
  );

  it.each(["shutdownGraceMs", "flushTimeoutMs", "takeTimeoutMs", "retryBaseMs", "retryCapMs"])(
    "startWorker refuses %s of 30 days",
    async (name) => {
      expect(await errorOf(() => resolveWorkerConfig({ env: platform, [name]: THIRTY_DAYS }))).toMatchObject({
        code: "RUNLET_CONFIG_INVALID",
        message: `startWorker: ${name} must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
    },
  );

  it("the clients refuse a request timeout or back-off of 30 days", async () => {
    for (const name of ["requestTimeoutMs", "retryBaseMs", "retryCapMs"]) {
      expect(
        await errorOf(() => createClient({ apiKey: "k", baseUrl: "http://x", [name]: THIRTY_DAYS })),
      ).toMatchObject({
        code: "RUNLET_CONFIG_INVALID",
        message: `${name} must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
    }
    expect(
      await errorOf(() => createManagementClient({ apiKey: "k", timeoutMs: THIRTY_DAYS })),
    ).toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message: `timeoutMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
    });
  });

  it("the job client's waits refuse a timeout or poll interval of 30 days before sending anything", async () => {
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "j", status: "IN_QUEUE" }));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const { port } = server.address() as { port: number };
      const endpoint = createClient({ apiKey: "k", baseUrl: `http://127.0.0.1:${port}` }).endpoint("e");
      expect(await errorOf(() => endpoint.wait("j", { timeoutMs: THIRTY_DAYS }))).toMatchObject({
        code: "RUNLET_CONFIG_INVALID",
        message: `timeoutMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
      expect(await errorOf(() => endpoint.wait("j", { pollIntervalMs: THIRTY_DAYS }))).toMatchObject({
        message: `pollIntervalMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
      for (const name of ["pollIntervalMs", "readIntervalMs"]) {
        const read = async () => {
          for await (const _ of endpoint.stream("j", { [name]: THIRTY_DAYS })) break;
        };
        expect(await errorOf(read)).toMatchObject({
          message: `${name} must be ${LIMIT}, got ${THIRTY_DAYS}`,
        });
      }
      expect(requests).toBe(0);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it("the harness and the warm cache refuse their durations of 30 days", async () => {
    expect(await errorOf(() => startHarness({ heartbeatTimeoutMs: THIRTY_DAYS }))).toMatchObject({
      code: "RUNLET_HARNESS_CONFIG",
      message: `heartbeatTimeoutMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
    });
    expect(await errorOf(() => startHarness({ webhooks: { retryDelayMs: THIRTY_DAYS } }))).toMatchObject({
      code: "RUNLET_HARNESS_CONFIG",
      message: `webhooks.retryDelayMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
    });
    expect(
      await errorOf(() => checkWarmCacheOptions({ dirs: ["/models"], shutdownSyncMs: THIRTY_DAYS })),
    ).toMatchObject({
      code: "RUNLET_HANDLER_INVALID",
      message: `warmCache.shutdownSyncMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
    });
  });

  // On main this download failed at once with RUNLET_S3_DOWNLOAD_TIMEOUT ("did not finish within
  // its timeout of 2592000000 ms"): the timer overflowed and fired after 1 ms.
  it("a download's timeoutMs of 30 days is refused, not a timeout after 1 ms", async () => {
    const server = createServer((_req, res) => {
      setTimeout(() => res.end("late bytes"), 200);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const tmpRoot = await mkdtemp(join(tmpdir(), "runlet-durations-"));
    try {
      const { port } = server.address() as { port: number };
      const jobS3 = createJobS3({
        jobId: "job-d",
        s3Config: undefined,
        bucket: undefined,
        signal: new AbortController().signal,
        log: pino({ enabled: false }),
        allowPrivateAddresses: true,
        tmpRoot,
      });
      const err = await errorOf(() =>
        jobS3.download(`http://127.0.0.1:${port}/f`, { timeoutMs: THIRTY_DAYS }),
      );
      expect(err).toMatchObject({
        code: "RUNLET_CONFIG_INVALID",
        message: `timeoutMs must be ${LIMIT}, got ${THIRTY_DAYS}`,
      });
      try {
        const ok = await jobS3.download(`http://127.0.0.1:${port}/f`, { timeoutMs: MAX_TIMER_MS });
        if (!("path" in ok)) throw new Error("expected a file");
        expect(await readFile(ok.path, "utf8")).toBe("late bytes");
      } finally {
        await jobS3.cleanup();
        await rm(tmpRoot, { recursive: true, force: true });
      }
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it("holds a job's policy.executionTimeout past the limit to the limit", () => {
    const job = (executionTimeout: number) => ({ id: "j", input: {}, policy: { executionTimeout } });
    expect(jobTimeoutMs(job(THIRTY_DAYS), 600_000)).toBe(MAX_TIMER_MS);
    expect(jobTimeoutMs(job(604_800_000), 600_000)).toBe(604_800_000);
  });
});
