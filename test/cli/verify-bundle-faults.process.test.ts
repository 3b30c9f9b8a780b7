import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BUNDLE_FILE } from "../../src/cli/bundle.js";
import { verifyBundle } from "../../src/cli/verify-bundle.js";

// The verify step of `runlet build` when the worker cannot start or will not stop. The "bundle" is
// a small hand-written worker.mjs that logs the line verifyBundle waits for (a stand-in for a
// built worker: what is tested is how the step treats the process, not a handler).

const folders: string[] = [];
const execPath = process.execPath;
afterEach(async () => {
  // Put back even when a test timed out in the middle (on main the spawn-failure one hangs).
  process.execPath = execPath;
  for (const dir of folders.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A project folder whose dist/ holds `worker` as the bundle. */
async function projectWith(worker: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "runlet-verify-faults-"));
  folders.push(dir);
  await mkdir(join(dir, "dist"));
  await writeFile(join(dir, "dist", BUNDLE_FILE), worker);
  return dir;
}

const READY = 'console.log(JSON.stringify({ msg: "worker ready" }));\nsetInterval(() => {}, 1_000);\n';

describe("verifyBundle and the worker process", () => {
  it("fails the step with a clear message when the worker cannot be spawned", async () => {
    const dir = await projectWith(READY);
    // A Node that is not there: spawn's real ENOENT. On main the child had no 'error' listener,
    // so the event was thrown out of the emitter (the CLI died with a stack trace).
    process.execPath = join(dir, "no-such-node");
    await expect(
      verifyBundle({
        projectDir: dir,
        distDir: join(dir, "dist"),
        declared: [],
        timeoutMs: 60_000,
        mode: "setup",
      }),
    ).rejects.toThrow(
      `the verify step (dist/ alone in an empty folder) failed: the worker could not be started (${join(dir, "no-such-node")}): spawn ${join(dir, "no-such-node")} ENOENT`,
    );
  }, 20_000);

  it("waits the stop grace it names for a worker that ignores SIGTERM", async () => {
    const dir = await projectWith(`process.on("SIGTERM", () => {});\n${READY}`);
    // On main the wait ran to the step's deadline (60 s here) while the message said 30 s.
    await expect(
      verifyBundle({
        projectDir: dir,
        distDir: join(dir, "dist"),
        declared: [],
        timeoutMs: 60_000,
        mode: "setup",
        stopGraceMs: 500,
      }),
    ).rejects.toThrow("the worker did not stop within 0.5 s of SIGTERM");
  }, 20_000);

  it("passes a worker that stops with exit 0 on SIGTERM", async () => {
    const dir = await projectWith(`process.on("SIGTERM", () => process.exit(0));\n${READY}`);
    const report = await verifyBundle({
      projectDir: dir,
      distDir: join(dir, "dist"),
      declared: [],
      timeoutMs: 60_000,
      mode: "setup",
    });
    expect(report.jobs).toEqual([]);
    expect(report.hadInput).toBe(false);
  }, 20_000);
});

describe("verifyBundle and what the worker leaves running (issue 51, item 6)", () => {
  it("ends a grandchild that holds the worker's pipes, naming it, instead of waiting for ever", async () => {
    // The bundle starts a long sleep with inherited stdio (as a setup that starts a server might),
    // then exits 0 on SIGTERM. On main the step waited for the pipes to close: for ever.
    const dir = await projectWith(
      [
        'import { spawn } from "node:child_process";',
        'const child = spawn("sleep", ["300"], { stdio: "inherit" });',
        'console.log(JSON.stringify({ msg: "sleeper", pid: child.pid }));',
        'process.on("SIGTERM", () => process.exit(0));',
        READY,
      ].join("\n"),
    );
    const failed = await verifyBundle({
      projectDir: dir,
      distDir: join(dir, "dist"),
      declared: [],
      timeoutMs: 60_000,
      mode: "setup",
    }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(
      /the worker exited, but what it started was left running, holding its output: pid (\d+) \(sleep 300\); the verify step ended its process group/,
    );
    const pid = Number(/pid (\d+) \(sleep 300\)/.exec(failed!.message)![1]);
    // Gone: killed with the group. Its parent exited first, so it may linger as a zombie until
    // whatever adopted it reaps it: a zombie runs nothing.
    await expect
      .poll(() => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
          return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z") ? "gone" : "running";
        } catch {
          return "gone";
        }
      })
      .toBe("gone");
  }, 30_000);
});
