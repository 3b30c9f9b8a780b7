import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { type RunletChild, startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness, waitFor } from "../support/workers.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Runs `runlet start <fixture>` as a real child process against endpoint "local" of `h`. */
function startChild(
  h: Harness,
  fixture: string,
  env: Record<string, string> = {},
  podId = "pod-child",
  args: readonly string[] = [],
): RunletChild {
  return startRunletChild(h, `test/fixtures/${fixture}`, {
    podId,
    env: { RUNPOD_ENDPOINT_ID: "local", ...env },
    args,
  });
}

describe("the worker as a real process (runlet start)", () => {
  it("finishes a running job on SIGTERM, fails the one past the grace, and exits 0", async () => {
    await using h = await testHarness();
    const c = startChild(h, "slow.ts", {}, "pod-term", ["--shutdown-grace-ms", "2000"]);
    try {
      // The quick job must still run when the long one starts, and end well within the grace.
      const quick = h.enqueue("local", { input: { ms: 800 } });
      const long = h.enqueue("local", { input: { ms: 60_000 } });
      await waitFor(
        "both jobs to run",
        () => h.job(quick)?.status === "IN_PROGRESS" && h.job(long)?.status === "IN_PROGRESS",
        20_000,
      );
      c.child.kill("SIGTERM");
      const exit = await c.exited;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(h.job(quick)!.status).toBe("COMPLETED");
      expect(h.job(quick)!.output).toEqual({ slept: 800 });
      expect(h.job(long)!.status).toBe("FAILED");
      expect(h.job(long)!.error).toBe(
        "worker shutting down: the job did not finish within the 2000 ms shutdown grace",
      );
      // Platform-mode logs: one JSON line a message, with Started./Finished. per job.
      expect(c.output()).toContain(`{"level":"INFO","requestId":"${quick}","message":"Started."}`);
      expect(c.output()).toContain('"message":"Finished."');
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);

  it("reports a synchronous in-process loop as timed out from the watchdog and ends the process with SIGKILL", async () => {
    await using h = await testHarness();
    const c = startChild(h, "spin-in-process.ts", {}, "pod-spin");
    try {
      const id = h.enqueue("local", { input: {} });
      const exit = await c.exited;
      // The watchdog thread cannot end a process whose main thread is stuck but by SIGKILL.
      expect(exit).toEqual({ code: null, signal: "SIGKILL" });
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toBe("job timed out after 300 ms (executionTimeout)");
      expect(job.duplicateResults).toBe(0);
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);

  it("names a job whose id is longer than a job-table slot in its pings, and the watchdog reports it", async () => {
    await using h = await testHarness();
    const c = startChild(h, "spin-in-process.ts", { RUNPOD_PING_INTERVAL: "100" }, "pod-long");
    try {
      // 300 UTF-8 bytes and more, with characters the job-done URL must encode: a slot holds 224.
      const id = `long-ü/${"x".repeat(300)} #1`;
      h.enqueue("local", { input: {}, id });
      const exit = await c.exited;
      expect(exit).toEqual({ code: null, signal: "SIGKILL" });
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toBe("job timed out after 300 ms (executionTimeout)");
      // The main thread spun for the deadline, the grace and the watchdog's slack: pings meanwhile named the job.
      const pings = h.requests({ route: "ping" }).filter((r) => r.path.endsWith("/pod-long"));
      expect(pings.some((r) => r.query["job_id"] === id)).toBe(true);
    } finally {
      await stopRunletChild(c);
    }
  }, 30_000);

  it("keeps pinging while a handler blocks the main thread", async () => {
    await using h = await testHarness();
    const c = startChild(h, "block-main.ts", { RUNPOD_PING_INTERVAL: "100" }, "pod-block");
    try {
      const marker = (name: string) => `${h.url}/v2/local/ping/${name}?gpu=marker`;
      const id = h.enqueue("local", {
        input: {
          startUrl: marker("block-start"),
          endUrl: marker("block-end"),
          key: h.apiKey,
          blockMs: 1_500,
        },
      });
      const job = await h.waitForJob(id, { timeoutMs: 20_000 });
      expect(job.output).toBe("unblocked");
      const pings = h.requests({ route: "ping" });
      const start = pings.findIndex((r) => r.path.endsWith("/block-start"));
      const end = pings.findIndex((r) => r.path.endsWith("/block-end"));
      expect(start).toBeGreaterThanOrEqual(0);
      expect(end).toBeGreaterThan(start);
      const during = pings.slice(start + 1, end).filter((r) => r.path.endsWith("/pod-block"));
      expect(during.length).toBeGreaterThanOrEqual(3);
      expect(during.every((r) => r.query["job_id"] === id)).toBe(true);
    } finally {
      c.child.kill("SIGTERM");
      await c.exited;
    }
  }, 30_000);

  it("explains that it needs the platform's environment and exits 2 in local mode", async () => {
    const child = spawn(process.execPath, ["bin/runlet.mjs", "start", "test/fixtures/slow.ts"], {
      cwd: ROOT,
      env: { PATH: process.env["PATH"] ?? "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toBe(
      "runlet start: RUNPOD_WEBHOOK_GET_JOB is not set, so there is no platform to take jobs from, and neither PORT nor RUNLET_MODE asks for a load-balancing server; this serves the platform inside its container. Locally, run `runlet dev <handler>` (a local platform plus workers) or `runlet test <handler> --input '{...}'` (one job) (RUNLET_CLI_NO_PLATFORM)\n",
    );
  });
});
