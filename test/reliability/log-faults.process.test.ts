import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { ROOT, waitFor } from "./helpers.js";

// Log writes are a task of their own (docs/reliability.md, "No task's error reaches the process"):
// the worker's stdout failing or stalling must not end the worker, hang it, or grow its memory
// without bound. `runlet start` runs as a real child process whose stdout is a real pipe; the
// test closes it (EPIPE on the next write) or stops reading it (a stalled reader).

function startChatty(h: Harness, podId: string): { child: ChildProcess; exited: Promise<number | string> } {
  const child = spawn(process.execPath, ["bin/runlet.mjs", "start", "test/fixtures/chatty.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...h.workerEnv("local", { podId, pingIntervalMs: 200 }),
      RUNPOD_ENDPOINT_ID: "local",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  return { child, exited };
}

async function allCompleted(h: Harness, ids: readonly string[]): Promise<void> {
  await waitFor(
    `${ids.length} jobs to complete`,
    () => ids.every((id) => h.job(id)?.status === "COMPLETED"),
    60_000,
  );
}

describe("the worker's log output fails or stalls", () => {
  it("serves on after its stdout is closed (EPIPE on every log write), and stops cleanly", async () => {
    await using h = await startHarness({ takeTimeoutMs: 1_000 });
    const { child, exited } = startChatty(h, "pod-epipe");
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    try {
      await waitFor("the first take", () => h.requests({ route: "job-take" }).length > 0, 30_000);
      // The reader goes away: the worker's next log line meets EPIPE.
      child.stdout?.destroy();
      const ids = Array.from({ length: 5 }, () => h.enqueue("local", { input: { lines: 20 } }));
      await allCompleted(h, ids);
      expect(h.job(ids[4]!)?.output).toEqual({ logged: 20 });
      child.kill("SIGTERM");
      expect(await exited, stderr).toBe(0);
      // One line says what happened, on stderr (the log itself is what failed).
      expect(stderr.match(/writing the log failed \(.*EPIPE/g) ?? [], stderr).toHaveLength(1);
    } finally {
      child.kill("SIGKILL");
    }
  }, 90_000);

  it("drops and counts lines past a bound while its stdout's reader stalls, and serves on", async () => {
    await using h = await startHarness({ takeTimeoutMs: 1_000 });
    const { child, exited } = startChatty(h, "pod-stalled");
    let output = "";
    try {
      await waitFor("the first take", () => h.requests({ route: "job-take" }).length > 0, 30_000);
      // Nobody reads the pipe from now on: ~20 MB of lines, over the 8 MiB the worker may hold.
      child.stdout?.pause();
      const ids = Array.from({ length: 10 }, () => h.enqueue("local", { input: { lines: 2_000 } }));
      await allCompleted(h, ids);
      // The reader catches up; the next line the worker writes says how many were dropped.
      child.stdout?.on("data", (d: Buffer) => {
        output += d.toString();
      });
      child.stdout?.resume();
      // Quiet jobs until one's lines reach the reader behind the notice (lines written while the
      // backlog still exceeded the bound are dropped too).
      const noticeOf = () => output.split("\n").find((line) => line.includes("log lines were dropped"));
      for (let round = 0; round < 50 && noticeOf() === undefined; round += 1) {
        await allCompleted(h, [h.enqueue("local", { input: { lines: 0 } })]);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const notice = noticeOf();
      expect(notice, `${output.length} bytes read; ${output.slice(-300)}`).toBeDefined();
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      const dropped = (JSON.parse(notice!) as { dropped: number }).dropped;
      // Most of the 20 000 job lines: all but what fit in the bound and the pipe.
      expect(dropped).toBeGreaterThan(5_000);
    } finally {
      child.kill("SIGKILL");
    }
  }, 120_000);

  it.each(["platform", "local"] as const)(
    "(%s lines) says on stderr, once, that its stdout is /dev/full (ENOSPC on every log write), and serves on (issue 51, item 13)",
    async (mode) => {
      await using h = await startHarness({ takeTimeoutMs: 1_000 });
      const full = openSync("/dev/full", "w");
      const child = spawn(process.execPath, ["bin/runlet.mjs", "start", "test/fixtures/chatty.ts"], {
        cwd: ROOT,
        env: {
          ...process.env,
          ...h.workerEnv("local", { podId: `pod-full-${mode}`, pingIntervalMs: 200 }),
          // Without an endpoint id the worker logs pretty lines (pino-pretty), as `runlet start` locally.
          ...(mode === "platform" ? { RUNPOD_ENDPOINT_ID: "local" } : {}),
        },
        stdio: ["ignore", full, "pipe"],
      });
      closeSync(full);
      const exited = new Promise<number | string>((resolve) =>
        child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
      );
      let stderr = "";
      child.stderr?.on("data", (d: Buffer) => {
        stderr += d.toString();
      });
      try {
        const ids = Array.from({ length: 3 }, () => h.enqueue("local", { input: { lines: 20 } }));
        await allCompleted(h, ids);
        child.kill("SIGTERM");
        expect(await exited, stderr).toBe(0);
        expect(stderr.match(/writing the log failed \(.*ENOSPC/g) ?? [], stderr).toHaveLength(1);
      } finally {
        child.kill("SIGKILL");
      }
    },
    90_000,
  );
});
