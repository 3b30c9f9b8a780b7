import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { ROOT, startWorkerProcess, waitFor } from "./helpers.js";

const GRACE_MS = 2_000;

describe("reliability: SIGTERM with jobs in flight", () => {
  it("injects SIGTERM with 20 jobs running and a 2 s grace: jobs that end within the grace are reported, the rest fail with 'worker shutting down', exit 0", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500 });
    const worker = await startWorkerProcess(h, "test/reliability/fixtures/sleeper.ts", {
      podId: "terminated",
      args: ["--shutdown-grace-ms", String(GRACE_MS)],
    });
    try {
      // Ten end as soon as the SIGTERM arrives, so well within the grace however slow this
      // machine is (a fixed 1.5 s sleep raced the 2 s grace); ten would run for two minutes.
      const quick = Array.from({ length: 10 }, () =>
        h.enqueue("local", { input: { ms: 120_000, endOnSigterm: true } }),
      );
      const slow = Array.from({ length: 10 }, () => h.enqueue("local", { input: { ms: 120_000 } }));
      const all = [...quick, ...slow];
      // Handed out is not yet running: wait for a ping that names all 20 as running on the worker.
      await waitFor(
        "a ping naming all 20 jobs as running",
        () =>
          all.every((id) => h.job(id)?.status === "IN_PROGRESS") &&
          h
            .requests({ route: "ping" })
            .some((r) => all.every((id) => (r.query["job_id"] ?? "").split(",").includes(id))),
        20_000,
      );
      worker.child.kill("SIGTERM");
      // A bound on the wait, generous for a 2-core machine; the test asserts no duration.
      let bound: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        worker.exited,
        new Promise<string>((resolve) => {
          bound = setTimeout(() => resolve("still running"), GRACE_MS + 10_000);
        }),
      ]);
      clearTimeout(bound);
      expect(exit, worker.output()).toBe(0);
      // Every job was reported before the process exited: nothing is left IN_PROGRESS.
      for (const id of quick) {
        const job = h.job(id)!;
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual({ endedBy: "SIGTERM" });
      }
      for (const id of slow) {
        const job = h.job(id)!;
        expect(job.status).toBe("FAILED");
        expect(job.error).toBe(
          `worker shutting down: the job did not finish within the ${GRACE_MS} ms shutdown grace`,
        );
      }
      expect(h.health("local").jobs).toEqual({
        completed: 10,
        failed: 10,
        inProgress: 0,
        inQueue: 0,
        retried: 0,
      });
      const done = h.requests({ route: "job-done" });
      expect(done).toHaveLength(20);
      expect(done.every((r) => r.status === 200)).toBe(true);
    } finally {
      await worker.kill();
    }
  }, 60_000);
});

describe("SIGTERM during a hanging fitness check (issue 51, item 13)", () => {
  it("logs the fitness phase as cut, not done", async () => {
    await using h = await startHarness({ takeTimeoutMs: 500 });
    const child = spawn(
      process.execPath,
      ["bin/runlet.mjs", "start", "test/reliability/fixtures/hanging-health.ts"],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          ...h.workerEnv("local", { podId: "pod-fitness-cut" }),
          RUNPOD_ENDPOINT_ID: "local",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.stderr?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    const exited = new Promise<number | string>((resolve) =>
      child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
    );
    try {
      await waitFor("the health check to start", () => output.includes("health check started"), 30_000);
      child.kill("SIGTERM");
      expect(await exited, output).toBe(0);
      expect(output).not.toMatch(/start-up: fitness done/);
      const cut = output.split("\n").filter((l) => l.includes('"phase":"fitness"') && l.includes("cut"));
      expect(cut, output).toHaveLength(1);
      expect(JSON.parse(cut[0]!)).toMatchObject({ phaseState: "failed", cut: true });
      expect(cut[0]).toMatch(/start-up: fitness cut after [\d.]+ ms: the worker is stopping/);
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);
});
