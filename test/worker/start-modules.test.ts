import { describe, expect, it } from "vitest";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness, waitFor } from "../support/workers.js";

describe("runlet start", () => {
  it.each([
    ["test/fixtures/echo-plain.mjs", { a: 1 }, { kind: "mjs", input: { a: 1 } }],
    ["test/fixtures/echo-typed.mts", { n: 21 }, { kind: "mts", doubled: 42 }],
  ])(
    "runs a handler module %s and exits 0 on SIGTERM",
    async (file, input, output) => {
      await using h = await testHarness();
      const s = startRunletChild(h, file, { podId: `pod-${file.endsWith("mjs") ? "mjs" : "mts"}` });
      try {
        const id = h.enqueue("local", { input });
        const job = await h.waitForJob(id, { timeoutMs: 20_000 });
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toEqual(output);
        s.child.kill("SIGTERM");
        expect(await s.exited).toEqual({ code: 0, signal: null });
      } finally {
        await stopRunletChild(s);
      }
    },
    30_000,
  );

  it("exits 1 at once on a second signal while a job is still inside its grace", async () => {
    await using h = await testHarness();
    const s = startRunletChild(h, "test/fixtures/slow.ts", {
      podId: "pod-twice",
      args: ["--shutdown-grace-ms", "120000"],
    });
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
      await stopRunletChild(s);
    }
  }, 30_000);

  it("refuses a module whose default export is not a defineHandler result, with exit 1 and no stack", async () => {
    await using h = await testHarness();
    const s = startRunletChild(h, "test/fixtures/not-a-handler.mjs", { podId: "pod-bad" });
    expect(await s.exited).toEqual({ code: 1, signal: null });
    expect(s.output()).toMatch(/not-a-handler\.mjs must `export default defineHandler\(\{\.\.\.\}\)`/);
    expect(s.output()).toContain("(RUNLET_HANDLER_LOAD)");
    expect(s.output()).not.toMatch(/\n\s+at /);
  }, 30_000);
});
