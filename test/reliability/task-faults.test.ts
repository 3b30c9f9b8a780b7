import { createWriteStream } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pipeline } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { memoryHarness, waitFor, workerFor } from "../support/workers.js";

// A task's fault reaches its owner, never the process (docs/reliability.md, "No task's error
// reaches the process"): a job's download or stream pipe that fails fails that job with a code,
// and the worker serves its next job; a telemetry export that fails is a background task's fault,
// and the worker goes on. Real faults: a server that closes mid-body, /dev/full (ENOSPC on every
// write), an OTLP collector that drops every connection. Anything that escaped to the process
// would show as an unhandled rejection or uncaught exception in this one (the workers run in it).

let server: Server;
let base: string;
const escaped: unknown[] = [];
const onEscape = (err: unknown) => escaped.push(err);

beforeAll(async () => {
  process.on("unhandledRejection", onEscape);
  process.on("uncaughtException", onEscape);
  server = createServer((req, res) => {
    if (req.url === "/cut") {
      // Half of the declared body, then the connection goes.
      res.writeHead(200, { "content-length": "200000" });
      res.write(Buffer.alloc(100_000, 1), () => res.destroy());
    } else if (req.url === "/whole") {
      res.writeHead(200, { "content-length": "100000" });
      res.end(Buffer.alloc(100_000, 2));
    } else {
      // An OTLP collector that drops every export.
      req.socket.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  process.off("unhandledRejection", onEscape);
  process.off("uncaughtException", onEscape);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const handler = defineHandler({
  input: z.object({ mode: z.enum(["cut-file", "cut-stream", "full-disk", "ok"]) }),
  async handler({ input, s3 }) {
    if (input.mode === "cut-file") return s3.download(`${base}/cut`);
    if (input.mode === "cut-stream") {
      const got = await s3.download(`${base}/cut`, { to: "stream" });
      let bytes = 0;
      if ("stream" in got) for await (const chunk of got.stream) bytes += (chunk as Buffer).length;
      return { bytes };
    }
    if (input.mode === "full-disk") {
      const got = await s3.download(`${base}/whole`, { to: "stream" });
      if ("stream" in got) await pipeline(got.stream, createWriteStream("/dev/full"));
      return "never";
    }
    return "ok";
  },
});

describe("a task's fault reaches its owner", () => {
  it.each([
    ["a download to a file whose server closes mid-body", "cut-file"],
    ["a download read as a stream whose server closes mid-body", "cut-stream"],
    ["a download piped to a full disk (/dev/full: ENOSPC)", "full-disk"],
  ] as const)(
    "%s fails that job with a code, and the worker serves its next job",
    async (_name, mode) => {
      await using h = memoryHarness();
      await using w = await workerFor(h, handler, { allowPrivateAddresses: true });
      const codes = new Map<string, string>();
      w.on("failed", ({ jobId, code }) => codes.set(jobId, code));
      const id = h.enqueue("local", { input: { mode } });
      const failed = await h.waitForJob(id, { timeoutMs: 20_000 });
      expect(failed.status).toBe("FAILED");
      // The handler awaited the task, so its failure is the handler's: the platform's error report.
      expect(codes.get(id)).toBe("RUNLET_JOB_HANDLER_THREW");
      const report = JSON.parse(String(failed.error)) as { error_message: string };
      expect(report.error_message).toMatch(mode === "full-disk" ? /ENOSPC/ : /closed|terminated|aborted/i);
      const next = await h.waitForJob(h.enqueue("local", { input: { mode: "ok" } }), { timeoutMs: 20_000 });
      expect(next.output).toBe("ok");
      expect(escaped.map(String)).toEqual([]);
      await waitFor("the worker to hold no job", () => w.jobIds.length === 0);
    },
    30_000,
  );

  it("a telemetry export that fails stays telemetry's: the worker serves on and stops cleanly", async () => {
    await using h = memoryHarness();
    const w = await workerFor(h, handler, {
      env: {
        ...h.workerEnv("local"),
        RUNPOD_ENDPOINT_ID: "local",
        OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/otlp`,
        OTEL_METRIC_EXPORT_INTERVAL: "100",
        OTEL_BSP_SCHEDULE_DELAY: "50",
      },
    });
    const ids = Array.from({ length: 5 }, () => h.enqueue("local", { input: { mode: "ok" } }));
    for (const id of ids) expect((await h.waitForJob(id, { timeoutMs: 20_000 })).output).toBe("ok");
    // Let a few metric exports (every 100 ms) fail while the worker is idle.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await w.close();
    expect(await w.stopped).toEqual({ reason: "closed", exitCode: 0 });
    expect(escaped).toEqual([]);
  }, 30_000);
});
