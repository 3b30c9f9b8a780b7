import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler, WorkerUnfitError } from "../../src/index.js";
import { VERSION } from "../../src/version.js";
import { logSink, testHarness, waitFor, workerFor } from "../support/workers.js";

// docs/protocol.md, "Unfit workers": a worker that finds itself unfit pings once with
// status=unhealthy&check=<name>&reason=<text> and exits 1.

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

function unhealthyPings(h: Harness) {
  return h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
}

/** Every ping after the unhealthy one (there must be none). */
function pingsAfterUnhealthy(h: Harness) {
  const pings = h.requests({ route: "ping" });
  const at = pings.findIndex((r) => r.query["status"] === "unhealthy");
  return pings.slice(at + 1);
}

describe("health checks and the unhealthy ping", () => {
  it("pings unhealthy once with the check's name and reason, takes no job, and stops with exit code 1", async () => {
    await using h = await testHarness();
    const sink = logSink();
    const w = await workerFor(
      h,
      defineHandler({
        healthCheck: async () => {
          throw new WorkerUnfitError("gpu", "CUDA device lost");
        },
        handler: () => "never",
      }),
      { podId: "pod-unfit", sink },
    );
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const [ping, ...more] = unhealthyPings(h);
    expect(more).toEqual([]);
    expect(ping!.path).toBe("/v2/local/ping/pod-unfit");
    expect(ping!.query).toEqual({
      gpu: "LOCAL",
      status: "unhealthy",
      check: "gpu",
      reason: "CUDA device lost",
      runpod_version: `runlet/${VERSION}`,
    });
    expect(pingsAfterUnhealthy(h)).toEqual([]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
    expect(h.health("local").workers["unhealthy"]).toBe(1);
    const line = sink.lines.find((l) => l["code"] === "RUNLET_WORKER_UNFIT");
    expect(line?.["message"]).toBe(
      "the worker is unfit (gpu: CUDA device lost); pinging unhealthy, stopping, exit code 1",
    );
  });

  it("names a plain failure 'healthCheck' and counts false and a timeout as failures", async () => {
    const cases = [
      { check: () => Promise.reject(new Error("model weights missing")), reason: "model weights missing" },
      { check: () => false, reason: "the health check returned false" },
      {
        check: () => new Promise(() => {}),
        reason: "the health check did not finish within 100 ms (healthCheckTimeoutMs)",
      },
    ];
    for (const { check, reason } of cases) {
      await using h = await testHarness();
      const w = await workerFor(
        h,
        defineHandler({ healthCheck: check, healthCheckTimeoutMs: 100, handler: () => "never" }),
      );
      expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
      expect(unhealthyPings(h).map((r) => [r.query["check"], r.query["reason"]])).toEqual([
        ["healthCheck", reason],
      ]);
    }
  });

  it("runs the check every healthCheckIntervalMs while serving, and stops when it fails", async () => {
    await using h = await testHarness();
    let calls = 0;
    let failNow = false;
    const w = await workerFor(
      h,
      defineHandler({
        healthCheckIntervalMs: 50,
        healthCheck: () => {
          calls += 1;
          if (failNow) throw new Error("VRAM ECC errors");
        },
        handler: ({ input }) => ({ echo: input }),
      }),
    );
    const id = h.enqueue("local", { input: 1 });
    expect((await h.waitForJob(id)).output).toEqual({ echo: 1 });
    await waitFor("a few periodic checks", () => calls >= 3);
    expect(unhealthyPings(h)).toEqual([]);
    failNow = true;
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    expect(unhealthyPings(h).map((r) => r.query["reason"])).toEqual(["VRAM ECC errors"]);
  });

  it("fails the job of a handler that throws WorkerUnfitError, asks for a new worker, pings unhealthy and stops", async () => {
    await using h = await testHarness();
    const w = await workerFor(
      h,
      defineHandler({
        handler: () => {
          throw new WorkerUnfitError("cuda", "device-side assert triggered");
        },
      }),
      { podId: "pod-job-unfit" },
    );
    const id = h.enqueue("local", { input: {} });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const job = h.job(id)!;
    expect(job.status).toBe("FAILED");
    expect(job.error).toBe("device-side assert triggered");
    expect(h.requests({ route: "job-done" }).map((r) => r.body)).toEqual([
      '{"error":"device-side assert triggered","stopPod":true}',
    ]);
    const [ping] = unhealthyPings(h);
    expect(ping!.query["check"]).toBe("cuda");
    expect(ping!.query["reason"]).toBe("device-side assert triggered");
    expect(pingsAfterUnhealthy(h)).toEqual([]);
  });

  it("exits 1 from `runlet start` after the unhealthy ping (a real child process)", async () => {
    await using h = await testHarness();
    const inherited: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env))
      if ((!k.startsWith("RUNPOD_") || k.startsWith("RUNPOD_SKIP_")) && v !== undefined) inherited[k] = v;
    const child = spawn(process.execPath, ["bin/runlet.mjs", "start", "test/fixtures/unfit.ts"], {
      cwd: ROOT,
      env: {
        ...inherited,
        ...h.workerEnv("local", { podId: "pod-unfit-child" }),
        RUNPOD_ENDPOINT_ID: "local",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString();
    });
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    expect(exit, output).toEqual({ code: 1, signal: null });
    const pings = unhealthyPings(h);
    expect(pings).toHaveLength(1);
    expect(pings[0]!.path).toBe("/v2/local/ping/pod-unfit-child");
    expect(pings[0]!.query).toEqual({
      gpu: "LOCAL",
      status: "unhealthy",
      check: "gpu",
      reason: "no CUDA device & driver 0",
      runpod_version: `runlet/${VERSION}`,
    });
    expect(h.requests({ route: "job-take" })).toEqual([]);
    expect(output).toContain('"code":"RUNLET_WORKER_UNFIT"');
  }, 30_000);
});
