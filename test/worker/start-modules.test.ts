import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { testHarness, waitFor } from "./helpers.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

interface Started {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `runlet start <file>` as a real process against endpoint "local" of `h`. */
function start(h: Harness, file: string, podId: string, args: readonly string[] = []): Started {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith("RUNPOD_") && v !== undefined) env[k] = v;
  const child = spawn(process.execPath, ["bin/runlet.mjs", "start", file, ...args], {
    cwd: ROOT,
    env: { ...env, ...h.workerEnv("local", { podId }) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  child.stdout?.on("data", (d: Buffer) => {
    text += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    text += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => text, exited };
}

async function kill(s: Started): Promise<void> {
  if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill("SIGKILL");
  await s.exited;
}

describe("runlet start", () => {
  it.each([
    ["test/fixtures/echo-plain.mjs", { a: 1 }, { kind: "mjs", input: { a: 1 } }],
    ["test/fixtures/echo-typed.mts", { n: 21 }, { kind: "mts", doubled: 42 }],
  ])(
    "runs a handler module %s and exits 0 on SIGTERM",
    async (file, input, output) => {
      await using h = await testHarness();
      const s = start(h, file, `pod-${file.endsWith("mjs") ? "mjs" : "mts"}`);
      try {
        const id = h.enqueue("local", { input });
        const job = await h.waitForJob(id, { timeoutMs: 20_000 });
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual(output);
        s.child.kill("SIGTERM");
        expect(await s.exited).toEqual({ code: 0, signal: null });
      } finally {
        await kill(s);
      }
    },
    30_000,
  );

  it("exits 1 at once on a second signal while a job is still inside its grace", async () => {
    await using h = await testHarness();
    const s = start(h, "test/fixtures/slow.ts", "pod-twice", ["--shutdown-grace-ms", "120000"]);
    try {
      const id = h.enqueue("local", { input: { ms: 120_000 } });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS", 20_000);
      s.child.kill("SIGTERM");
      await waitFor("the first signal to be handled", () => s.output().includes("shutting down"), 20_000);
      s.child.kill("SIGINT");
      expect(await s.exited).toEqual({ code: 1, signal: null });
      expect(s.output()).toContain("second signal: exiting at once");
      // Nothing was reported for the job: the platform sees the worker die and reschedules it.
      expect(h.job(id)!.status).toBe("IN_PROGRESS");
    } finally {
      await kill(s);
    }
  }, 30_000);

  it("refuses a module whose default export is not a defineHandler result, with exit 1 and no stack", async () => {
    await using h = await testHarness();
    const s = start(h, "test/fixtures/not-a-handler.mjs", "pod-bad");
    expect(await s.exited).toEqual({ code: 1, signal: null });
    expect(s.output()).toMatch(/not-a-handler\.mjs must `export default defineHandler\(\{\.\.\.\}\)`/);
    expect(s.output()).toContain("(RUNLET_HANDLER_LOAD)");
    expect(s.output()).not.toMatch(/\n\s+at /);
  }, 30_000);
});
