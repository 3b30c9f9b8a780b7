import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { startWorkerProcess, waitFor } from "./helpers.js";

// The last line (docs/reliability.md, "No task's error reaches the process"): an error that
// escapes every owner — a throw from a timer a handler left behind, a promise rejected with nobody
// listening — is logged with its stack, pings unhealthy with check=crash, and the process exits 1
// at once. On c4947a0 the process died by Node's default (exit 1) with no unhealthy ping: the
// platform saw only the pings stop. `runlet start` runs as a real child process.

describe("an error that escapes every owner", () => {
  it.each(["throw", "reject"] as const)(
    "(%s) is logged with its stack, pings unhealthy with check=crash, and exits 1",
    async (mode) => {
      await using h = await startHarness({ takeTimeoutMs: 1_000 });
      const worker = await startWorkerProcess(h, "test/fixtures/crash.ts", { podId: `pod-crash-${mode}` });
      try {
        const id = h.enqueue("local", { input: { mode } });
        const code = await worker.exited;
        expect(code, worker.output()).toBe(1);
        const pings = h
          .requests({ route: "ping" })
          .filter((r) => r.query["status"] === "unhealthy" && r.path.includes(worker.podId));
        expect(pings, worker.output()).toHaveLength(1);
        expect(pings[0]!.query["check"]).toBe("crash");
        const message =
          mode === "throw" ? "a bug in a timer the handler left behind" : "a bug in a promise nobody awaited";
        expect(pings[0]!.query["reason"]).toBe(
          `${mode === "throw" ? "uncaughtException" : "unhandledRejection"}: Error: ${message}`,
        );
        const output = worker.output();
        expect(output).toContain('"code":"RUNLET_WORKER_CRASHED"');
        // The stack, naming the fixture's line.
        expect(output).toMatch(/"stack":"Error: a bug[^"]*\\n\s+at [^"]*crash\.ts/);
        // The job it held was not reported by the dead process: the platform sees the worker gone.
        await waitFor("the job to be taken", () => h.job(id)?.status === "IN_PROGRESS");
        expect(h.requests({ route: "job-done" })).toEqual([]);
      } finally {
        await worker.kill();
      }
    },
    40_000,
  );
});

describe("process.exit() in a handler (issue 51, item 8)", () => {
  it.each([0, 3])(
    "process.exit(%i) while a job runs logs one fatal line naming the job, and the worker exits non-zero",
    async (code) => {
      await using h = await startHarness({ takeTimeoutMs: 1_000 });
      const worker = await startWorkerProcess(h, "test/reliability/fixtures/process-exit.ts", {
        podId: `pod-exit-${code}`,
      });
      try {
        const id = h.enqueue("local", { input: { code } });
        const exit = await worker.exited;
        const output = worker.output();
        // Its own code when not 0; 1 for a handler's exit(0), which would read as a clean stop.
        expect(exit, output).toBe(code === 0 ? 1 : code);
        const fatal = output.split("\n").filter((l) => l.includes('"code":"RUNLET_WORKER_EXITED"'));
        expect(fatal, output).toHaveLength(1);
        const line = JSON.parse(fatal[0]!) as Record<string, unknown>;
        expect(line).toMatchObject({ level: "FATAL", jobs: [id], exitCode: code });
        expect(String(line["message"])).toContain(`process.exit(${code}) was called while 1 job ran (${id})`);
      } finally {
        await worker.kill();
      }
    },
    40_000,
  );
});
