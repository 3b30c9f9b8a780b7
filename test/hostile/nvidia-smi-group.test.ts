import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { probeGpu, readFitnessConfig } from "../../src/worker/fitness/index.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

// Issue 42, item 14: the processes a hung nvidia-smi started must die with it. This machine has
// no GPU: a shell script named nvidia-smi on PATH stands in for the tool (a test double; the real
// one only exists beside a GPU), and starts a real helper process that sleeps holding its output.

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const started: number[] = [];
const folders: string[] = [];
afterEach(async () => {
  // Whatever a failing run left behind (on main, the helpers sleep for 300 s).
  for (const dir of folders) {
    for (const file of ["smi.pid", "helper.pid"]) {
      const pid = Number((await readFile(join(dir, file), "utf8").catch(() => "")).trim());
      if (pid > 0) started.push(pid);
    }
  }
  for (const pid of started.splice(0)) if (alive(pid)) process.kill(pid, "SIGKILL");
  for (const dir of folders.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A folder holding a stand-in nvidia-smi whose body is `body`; its PATH and pid files. */
async function standIn(body: string) {
  const dir = await mkdtemp(join(tmpdir(), "runlet-smi-"));
  folders.push(dir);
  const script = `#!/bin/sh\n# stand-in for nvidia-smi (test double)\n${body.replaceAll("DIR", dir)}\n`;
  await writeFile(join(dir, "nvidia-smi"), script);
  await chmod(join(dir, "nvidia-smi"), 0o755);
  const pids = async (): Promise<number[]> => {
    const list = await Promise.all(
      ["smi.pid", "helper.pid"].map(async (f) => Number((await readFile(join(dir, f), "utf8")).trim())),
    );
    // Only real pids: a file read while being written gives 0, and kill(0) is this test's own group.
    started.push(...list.filter((pid) => Number.isInteger(pid) && pid > 0));
    return list;
  };
  return { PATH: [dir, "/usr/bin", "/bin"].join(delimiter), pids };
}

describe("a hung nvidia-smi and what it started (issue 42, item 14)", () => {
  it("kills its whole process group at the bound, helpers holding its output included", async () => {
    const smi = await standIn("echo $$ > DIR/smi.pid\nsleep 300 &\necho $! > DIR/helper.pid\nsleep 300");
    const config = readFitnessConfig({ PATH: smi.PATH, RUNPOD_GPU_TEST_TIMEOUT: "0.5" });
    const probe = await probeGpu(config, new AbortController().signal, join(tmpdir(), "no-such-dev"));
    // On main the stand-in itself was killed at the bound; its helpers slept on.
    const pids = await smi.pids();
    await waitFor("the stand-in and its helper to be gone", () => !pids.some(alive), 10_000);
    expect(probe).toEqual({
      kind: "broken",
      reason: "nvidia-smi did not finish within 0.5 s (RUNPOD_GPU_TEST_TIMEOUT)",
    });
  }, 20_000);

  it("ends what it left running when it exits on its own", async () => {
    const smi = await standIn(
      "echo $$ > DIR/smi.pid\nsleep 300 &\necho $! > DIR/helper.pid\necho '| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |'",
    );
    const config = readFitnessConfig({ PATH: smi.PATH, RUNPOD_GPU_TEST_TIMEOUT: "30" });
    const probe = await probeGpu(config, new AbortController().signal, join(tmpdir(), "no-such-dev"));
    expect(probe).toEqual({
      kind: "present",
      summary: "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |\n",
    });
    const [, helper] = await smi.pids();
    await waitFor("the helper to be gone", () => !alive(helper!), 10_000);
  }, 20_000);

  it("is cut short by the checks' signal, its group with it", async () => {
    const smi = await standIn("echo $$ > DIR/smi.pid\nsleep 300 &\necho $! > DIR/helper.pid\nsleep 300");
    const config = readFitnessConfig({ PATH: smi.PATH, RUNPOD_GPU_TEST_TIMEOUT: "600" });
    const closing = new AbortController();
    const probe = probeGpu(config, closing.signal, join(tmpdir(), "no-such-dev"));
    // The pid files are written by the stand-in as it starts: read until both hold a pid.
    const pids = await waitForAsync("the stand-in to write smi.pid and helper.pid", async () => {
      const list = await smi.pids().catch(() => undefined);
      return list?.every((pid) => Number.isInteger(pid) && pid > 0) === true && list;
    });
    closing.abort();
    expect((await probe).kind).toBe("broken");
    await waitFor("the stand-in and its helper to be gone", () => !pids.some(alive), 10_000);
  }, 20_000);
});
