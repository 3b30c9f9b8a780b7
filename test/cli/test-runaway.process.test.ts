import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "../support/run-cli.js";

/**
 * `runlet test` with handlers that do not stop at their deadline (issue 12, bug 8). The deadline
 * (1 s) plus the hard-stop grace (1 s) is what the command may take to report; the upper bounds
 * below are generous (a loaded machine starts node, tsx and a worker process slowly).
 */
const RUNLET = JSON.stringify(join(REPO_ROOT, "src/index.ts"));
const HINT =
  'runlet test: hint: a handler that does synchronous work holds its thread, and in-process nothing can stop it at its deadline; give it isolation: "thread" in defineHandler so the worker can end it\n';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-test-runaway-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/**
 * Writes a handler (`definition`: the object given to defineHandler) and runs `runlet test` on it:
 * the job must be reported as timed out, with the isolation hint, exit 1, well before the kill.
 */
async function expectTimedOut(file: string, definition: string): Promise<void> {
  const handler = join(tmp, file);
  await writeFile(
    handler,
    `import { defineHandler } from ${RUNLET};\nexport default defineHandler(${definition});\n`,
  );
  const started = Date.now();
  const r = await runCli(["test", handler, "--input", '{"input": {}}'], { timeoutMs: 90_000 });
  const tookMs = Date.now() - started;
  expect(r.code, r.stderr).toBe(1);
  expect(r.stdout).toBe("");
  expect(r.stderr).toMatch(
    /\nrunlet test: the job FAILED in \d+ ms: job timed out after 1000 ms \(executionTimeout\) \(RUNLET_JOB_TIMEOUT\)\n/,
  );
  expect(r.stderr.endsWith(HINT)).toBe(true);
  expect(tookMs).toBeLessThan(60_000);
}

describe("runlet test with a handler that ignores its deadline", () => {
  it("reports a synchronous endless loop as failed, hints at isolation: thread, and exits 1", async () => {
    await expectTimedOut(
      "spin.ts",
      "{ executionTimeoutMs: 1000, hardStopGraceMs: 1000, handler: () => { for (;;) {} } }",
    );
  }, 100_000);

  it("does not stay alive for an async handler that ignores its aborted signal", async () => {
    // The handler's own timer would keep a process alive for 10 minutes.
    await expectTimedOut(
      "deaf.ts",
      "{ executionTimeoutMs: 1000, hardStopGraceMs: 1000, handler: () => new Promise((r) => setTimeout(() => r({ late: true }), 600_000)) }",
    );
  }, 100_000);
});

describe("runlet test with a handler that stops at its deadline", () => {
  it("reports the timeout without the synchronous-work hint (issue 45)", async () => {
    const handler = join(tmp, "honours.ts");
    // It ends as soon as its signal aborts: nothing held its thread, so the hint would mislead.
    await writeFile(
      handler,
      `import { defineHandler } from ${RUNLET};\nexport default defineHandler({ executionTimeoutMs: 1000, hardStopGraceMs: 1000, handler: ({ signal }) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))) });\n`,
    );
    const r = await runCli(["test", handler, "--input", '{"input": {}}'], { timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /\nrunlet test: the job FAILED in \d+ ms: job timed out after 1000 ms \(executionTimeout\) \(RUNLET_JOB_TIMEOUT\)\n/,
    );
    expect(r.stderr).not.toContain("hint:");
    expect(r.stderr).not.toContain("ignored its aborted signal");
  }, 100_000);
});
