import { readFileSync } from "node:fs";
import { appendFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkerPool } from "../../src/cli/worker-pool.js";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { REPO_ROOT } from "../support/run-cli.js";
import { waitFor } from "../support/wait-for.js";

/**
 * `runlet dev`'s reload (docs/cli.md): its workers (WorkerPool, wired to the harness as the dev
 * command wires it: `onRetire` retires a worker in the harness before it is signalled) are real
 * `runlet start` processes on a harness on loopback. The test drives the moment the bug lived in:
 * the reload and a new job in one tick, while the old worker's job-take is held in the harness.
 * Before the retirement the job went to that take and ran on the old code; test/cli/dev-banner
 * checks the same end to end through `runlet dev` itself.
 */

const RUNLET = JSON.stringify(join(REPO_ROOT, "src/index.ts"));

/** A handler that answers with its version. */
function handler(version: number): string {
  return [
    `import { defineHandler } from ${RUNLET};`,
    `export default defineHandler({ handler: () => ({ version: ${version} }) });`,
    "",
  ].join("\n");
}

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-reload-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Whether the harness holds a job-take of `podId` open right now. */
function takeHeld(h: Harness, podId: string | undefined): boolean {
  return h
    .requests({ route: "job-take" })
    .some((r) => r.path.endsWith(`/job-take/${podId}`) && r.status === "pending");
}

describe("runlet dev's reload", () => {
  it("hands a job sent right after the reload to a new worker, though the old one's take is still held", async () => {
    // Takes are held for a minute, so the old worker's take is the one it sent, held throughout.
    await using harness = await startHarness({ takeTimeoutMs: 60_000 });
    const file = join(tmp, "handler.ts");
    await writeFile(file, handler(1));
    const pods: string[] = [];
    const lines: string[] = [];
    await using pool = new WorkerPool({
      handlerPath: file,
      size: 1,
      envFor: () => {
        const env: Record<string, string> = {
          ...harness.workerEnv("local"),
          RUNPOD_NETWORK_CHECK_TARGET: "off",
        };
        pods.push(env["RUNPOD_POD_ID"] ?? "");
        return env;
      },
      onLine: (label, line) => lines.push(`[${label}] ${line}`),
      onExit: (label, code, signal) => lines.push(`${label} exited (${signal ?? code})`),
      onStartFailed: (failure) => lines.push(`start failed: ${JSON.stringify(failure)}`),
      onRetire: (_label, podId) => harness.retireWorker("local", podId),
    });
    const seen = () => lines.join("\n");
    pool.start();
    await waitFor("the first worker's held take", () => takeHeld(harness, pods[0]), 60_000).catch(
      (err: Error) => {
        throw new Error(`${err.message}\n${seen()}`);
      },
    );
    const old = pods[0]!;
    await writeFile(file, handler(2));
    await waitFor("the first worker's held take", () => takeHeld(harness, old));

    // One tick: nothing the old worker does can come between its held take and the new job.
    expect(takeHeld(harness, old)).toBe(true);
    const reloading = pool.reload();
    const id = harness.enqueue("local", { input: {} });
    expect(harness.job(id)?.status, "the job went to the retiring worker").toBe("IN_QUEUE");

    const done = await harness.waitForJob(id, { timeoutMs: 60_000 });
    expect(pods).toHaveLength(2);
    expect(done, seen()).toMatchObject({ status: "COMPLETED", output: { version: 2 }, workerId: pods[1] });
    await reloading;
    expect(pool.labels()).toEqual(["w2"]);
  }, 120_000);

  it("signals a stopping worker once: two quick reloads let the old worker finish its job, which runs once (issue 51, item 5)", async () => {
    await using harness = await startHarness({ takeTimeoutMs: 500 });
    const file = join(tmp, "slow-handler.ts");
    const runs = join(tmp, "runs.log");
    await writeFile(runs, "");
    const slow = (version: number): string =>
      [
        `import { appendFileSync } from "node:fs";`,
        `import { defineHandler } from ${RUNLET};`,
        "export default defineHandler({",
        "  handler: async () => {",
        `    appendFileSync(${JSON.stringify(runs)}, "run ${version}\\n");`,
        "    await new Promise((r) => setTimeout(r, 1_500));",
        `    return { version: ${version} };`,
        "  },",
        "});",
        "",
      ].join("\n");
    await writeFile(file, slow(1));
    const lines: string[] = [];
    await using pool = new WorkerPool({
      handlerPath: file,
      size: 1,
      envFor: () => ({ ...harness.workerEnv("local"), RUNPOD_NETWORK_CHECK_TARGET: "off" }),
      onLine: (label, line) => lines.push(`[${label}] ${line}`),
      onExit: (label, code, signal) => lines.push(`${label} exited (${signal ?? code})`),
      onStartFailed: (failure) => lines.push(`start failed: ${JSON.stringify(failure)}`),
      onRetire: (_label, podId) => harness.retireWorker("local", podId),
    });
    pool.start();
    const id = harness.enqueue("local", { input: {} });
    await waitFor("the job to run on the first worker", () => readFileSync(runs, "utf8") !== "", 60_000);
    // Two saves in quick succession while the job runs.
    await writeFile(file, slow(2));
    const first = pool.reload();
    await appendFile(file, "\n");
    const second = pool.reload();
    const done = await harness.waitForJob(id, { timeoutMs: 60_000 });
    await Promise.all([first, second]);
    expect(done, lines.join("\n")).toMatchObject({ status: "COMPLETED", output: { version: 1 } });
    // Past the next takes: the job is not run again on the new code.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await readFile(runs, "utf8"), lines.join("\n")).toBe("run 1\n");
  }, 120_000);
});
