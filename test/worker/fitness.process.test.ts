import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler, WorkerUnfitError } from "../../src/index.js";
import { createLogger } from "../../src/log/index.js";
import {
  builtInChecks,
  readFitnessConfig,
  readMemory,
  runFitnessChecks,
} from "../../src/worker/fitness/index.js";
import { startWorker } from "../../src/worker/index.js";
import { childEnv, REPO_ROOT, runCli, startCli } from "../support/run-cli.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { type LogSink, logSink, testHarness } from "../support/workers.js";

// docs/fitness.md: the built-in checks (memory, disk, network, cuda, gpu) then the handler's
// healthCheck; the first failure is one unhealthy ping with check=<name> and exit code 1.

let tmp: string;
/** A folder on PATH with no nvidia-smi, so the GPU checks see a CPU-only machine whatever this one has. */
let noGpuPath: string;
/** A TCP port on loopback that nothing listens on (it was bound, then closed). */
let closedPort: number;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-fitness-"));
  noGpuPath = join(tmp, "empty-bin");
  await mkdir(noGpuPath);
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closedPort = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const handler = defineHandler({ handler: () => "ok" });

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    // ESRCH: no such process.
    return false;
  }
}

/** Runs the built-in checks (and `definition`'s healthCheck) with `env`; what they found and logged. */
async function fitness(env: Record<string, string>, definition = handler) {
  const sink = logSink();
  const log = createLogger({ platform: true, level: "debug", destination: sink.stream });
  const closing = new AbortController();
  const config = readFitnessConfig({ PATH: noGpuPath, ...env });
  const unfit = await runFitnessChecks({ definition, config, builtIn: true, log, closing: closing.signal });
  return { unfit, sink, lines: sink.lines.filter((l) => l["fitness"] !== undefined) };
}

/** The one log line of check `name`. */
function lineOf(sink: LogSink, name: string) {
  const lines = sink.lines.filter((l) => l["fitness"] === name);
  expect(lines).toHaveLength(1);
  return lines[0] as Record<string, unknown>;
}

/** Every system check passes on this machine with these thresholds and a loopback target that listens. */
function passingEnv(h: { port: number }): Record<string, string> {
  return {
    RUNPOD_MIN_MEMORY_GB: "0.001",
    RUNPOD_MIN_DISK_PERCENT: "0",
    RUNPOD_NETWORK_CHECK_TARGET: `127.0.0.1:${h.port}`,
  };
}

function harnessPort(h: Harness): { port: number } {
  return { port: Number(new URL(h.url).port) };
}

describe("built-in system checks", () => {
  // A machine with NVIDIA device nodes is not CPU-only: the GPU checks would not skip there.
  it.skipIf(existsSync("/dev/nvidiactl"))(
    "runs memory, disk, network, cuda and gpu in order, one line each with its figure",
    async () => {
      await using h = await testHarness();
      const { unfit, lines, sink } = await fitness(passingEnv(harnessPort(h)));
      expect(unfit).toBeUndefined();
      expect(lines.map((l) => [l["fitness"], l["status"]])).toEqual([
        ["memory", "passed"],
        ["disk", "passed"],
        ["network", "passed"],
        ["cuda", "skipped"],
        ["gpu", "skipped"],
      ]);
      expect(lineOf(sink, "memory")["message"]).toMatch(
        /^fitness memory: \d+\.\d\d GB available \(of \d+\.\d\d GB.*; needs 0\.001 GB\)$/,
      );
      expect(lineOf(sink, "disk")["message"]).toMatch(
        /^fitness disk: \d+\.\d\d GB free on \/ \(\d+\.\d % of .*; needs 0 %\)$/,
      );
      expect(lineOf(sink, "network")["message"]).toMatch(
        new RegExp(`^fitness network: connected to 127\\.0\\.0\\.1:${harnessPort(h).port} in \\d+ ms$`),
      );
      // A CPU-only machine skips the GPU checks silently: at debug level only.
      expect(lineOf(sink, "gpu")["level"]).toBe("DEBUG");
      expect(lineOf(sink, "gpu")["message"]).toBe(
        "fitness gpu: skipped, no GPU (no nvidia-smi and no /dev/nvidia*)",
      );
    },
  );

  it("fails memory when RUNPOD_MIN_MEMORY_GB is past what this machine has, and runs nothing after it", async () => {
    const { unfit, lines } = await fitness({ RUNPOD_MIN_MEMORY_GB: "1000000" });
    expect(unfit?.check).toBe("memory");
    expect(unfit?.reason).toMatch(
      /^\d+\.\d\d GB available \(of \d+\.\d\d GB.*\), 1000000 GB required \(RUNPOD_MIN_MEMORY_GB\)$/,
    );
    expect(lines.map((l) => [l["fitness"], l["status"]])).toEqual([["memory", "failed"]]);
  });

  it("fails disk when RUNPOD_MIN_DISK_PERCENT asks for all of / free", async () => {
    const { unfit } = await fitness({ RUNPOD_MIN_MEMORY_GB: "0", RUNPOD_MIN_DISK_PERCENT: "100" });
    expect(unfit?.check).toBe("disk");
    expect(unfit?.reason).toMatch(
      /^\d+\.\d\d GB free on \/ \(\d+\.\d %\), 100 % required \(RUNPOD_MIN_DISK_PERCENT\)$/,
    );
  });

  it("fails network when the target refuses, naming the target; passes when any one of several answers", async () => {
    const refused = await fitness({
      RUNPOD_MIN_MEMORY_GB: "0",
      RUNPOD_MIN_DISK_PERCENT: "0",
      RUNPOD_NETWORK_CHECK_TARGET: `127.0.0.1:${closedPort}`,
    });
    expect(refused.unfit).toEqual({
      check: "network",
      reason: `no target answered (RUNPOD_NETWORK_CHECK_TARGET, RUNPOD_NETWORK_CHECK_TIMEOUT=5 s): 127.0.0.1:${closedPort}: connection refused`,
    });
    await using h = await testHarness();
    const either = await fitness({
      ...passingEnv(harnessPort(h)),
      RUNPOD_NETWORK_CHECK_TARGET: `127.0.0.1:${closedPort},127.0.0.1:${harnessPort(h).port}`,
    });
    expect(either.unfit).toBeUndefined();
  });

  it("turns the network check off with RUNPOD_NETWORK_CHECK_TARGET=off", async () => {
    const { unfit, sink } = await fitness({
      RUNPOD_MIN_MEMORY_GB: "0",
      RUNPOD_MIN_DISK_PERCENT: "0",
      RUNPOD_NETWORK_CHECK_TARGET: "off",
    });
    expect(unfit).toBeUndefined();
    expect(lineOf(sink, "network")["message"]).toBe(
      "fitness network: skipped, RUNPOD_NETWORK_CHECK_TARGET=off",
    );
  });

  it("skips memory, disk, network and cuda with RUNPOD_SKIP_AUTO_SYSTEM_CHECKS=true, and gpu with RUNPOD_SKIP_GPU_CHECK=true", async () => {
    const impossible = {
      RUNPOD_MIN_MEMORY_GB: "1000000",
      RUNPOD_MIN_DISK_PERCENT: "100",
      RUNPOD_NETWORK_CHECK_TARGET: `127.0.0.1:${closedPort}`,
    };
    const skipped = await fitness({ ...impossible, RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "TRUE" });
    expect(skipped.unfit).toBeUndefined();
    expect(skipped.lines.map((l) => l["fitness"])).toEqual(["gpu"]);
    const none = readFitnessConfig({ RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true", RUNPOD_SKIP_GPU_CHECK: "true" });
    expect(builtInChecks(none, new AbortController().signal)).toEqual([]);
    // Anything but "true" is false, as the Python SDK reads them.
    expect(readFitnessConfig({ RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "1" }).skipSystemChecks).toBe(false);
  });

  it("refuses a bad variable at start, naming it, its range and what came", () => {
    expect(() => readFitnessConfig({ RUNPOD_MIN_DISK_PERCENT: "150" })).toThrow(
      'RUNPOD_MIN_DISK_PERCENT must be a number from 0 to 100, got "150"',
    );
    expect(() => readFitnessConfig({ RUNPOD_MIN_CUDA_VERSION: "twelve" })).toThrow(
      'RUNPOD_MIN_CUDA_VERSION must be major.minor, like 12.1, got "twelve"',
    );
    expect(() => readFitnessConfig({ RUNPOD_NETWORK_CHECK_TARGET: "8.8.8.8" })).toThrow(
      'RUNPOD_NETWORK_CHECK_TARGET must be host:port[,host:port…] (port 1–65535) or off, got "8.8.8.8"',
    );
    const defaults = readFitnessConfig({});
    expect({ ...defaults, toolEnv: undefined }).toEqual({
      skipSystemChecks: false,
      skipGpuCheck: false,
      minMemoryGb: 4,
      minMemoryBytes: 4 * 1024 ** 3,
      minDiskPercent: 10,
      networkTimeoutMs: 5_000,
      networkTargets: [{ host: "8.8.8.8", port: 53 }],
      minCudaVersion: [11, 8],
      gpuTestTimeoutMs: 30_000,
      gpuBenchmarkTimeoutMs: 2_000,
      gpuTestBinary: undefined,
      toolEnv: undefined,
    });
  });
});

describe("the memory reading", () => {
  /** Writes a /proc/meminfo and a cgroup folder of its own (real files standing in for the kernel's). */
  async function machine(name: string, files: Record<string, string>) {
    const root = join(tmp, name);
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(root, path, ".."), { recursive: true });
      await writeFile(join(root, path), text);
    }
    return { meminfo: join(root, "meminfo"), cgroupRoot: join(root, "cgroup") };
  }
  const meminfo = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\nMemAvailable:    8388608 kB\n";
  const GiB = 1024 ** 3;

  it("reads MemAvailable when the container has no limit", async () => {
    const m = await readMemory(await machine("unlimited", { meminfo, "cgroup/memory.max": "max\n" }));
    expect(m).toEqual({ availableBytes: 8 * GiB, totalBytes: 16 * GiB, limitBytes: undefined });
  });

  it("caps it by the cgroup v2 limit, counting inactive page cache as free", async () => {
    const m = await readMemory(
      await machine("v2", {
        meminfo,
        "cgroup/memory.max": `${2 * GiB}\n`,
        "cgroup/memory.current": `${1.5 * GiB}\n`,
        "cgroup/memory.stat": `anon 100\ninactive_file ${0.5 * GiB}\n`,
      }),
    );
    expect(m).toEqual({ availableBytes: 1 * GiB, totalBytes: 2 * GiB, limitBytes: 2 * GiB });
  });

  it("reads a cgroup v1 limit too", async () => {
    const m = await readMemory(
      await machine("v1", {
        meminfo,
        "cgroup/memory/memory.limit_in_bytes": `${3 * GiB}\n`,
        "cgroup/memory/memory.usage_in_bytes": `${1 * GiB}\n`,
        "cgroup/memory/memory.stat": "total_inactive_file 0\n",
      }),
    );
    expect(m).toEqual({ availableBytes: 2 * GiB, totalBytes: 3 * GiB, limitBytes: 3 * GiB });
  });
});

describe("GPU checks, through a stand-in nvidia-smi", () => {
  // This machine has no GPU: each case puts a shell script named nvidia-smi on PATH that prints
  // what a real nvidia-smi prints (a test double; the real tool only exists beside a GPU).
  const SUMMARY = (cuda: string) =>
    `+-----------------------------------------------------------------------------------------+\n` +
    `| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: ${cuda}     |\n` +
    `|-----------------------------------------+------------------------+----------------------+\n`;
  const HEALTHY_ROWS =
    "0, NVIDIA H100 80GB HBM3, 81559, 1, Default, 0\n1, NVIDIA H100 80GB HBM3, 81559, 3, Default, 0\n";

  /** A PATH whose first folder holds a stand-in nvidia-smi answering the summary and the query. */
  async function standIn(name: string, summary: string, query: string, extra: Record<string, string> = {}) {
    const dir = join(tmp, name);
    await mkdir(dir, { recursive: true });
    const script = `#!/bin/sh\n# stand-in for nvidia-smi (test double)\ncase "$1" in\n  --query-gpu=*) ${query} ;;\n  *) cat <<'EOT'\n${summary}EOT\n ;;\nesac\n`;
    await writeFile(join(dir, "nvidia-smi"), script);
    await chmod(join(dir, "nvidia-smi"), 0o755);
    for (const [file, text] of Object.entries(extra)) {
      await writeFile(join(dir, file), text);
      await chmod(join(dir, file), 0o755);
    }
    return [dir, "/usr/bin", "/bin"].join(delimiter);
  }
  const noSystem = {
    RUNPOD_MIN_MEMORY_GB: "0",
    RUNPOD_MIN_DISK_PERCENT: "0",
    RUNPOD_NETWORK_CHECK_TARGET: "off",
  };

  it("passes a healthy driver and devices, one line each with the CUDA version and the devices", async () => {
    const PATH = await standIn("healthy", SUMMARY("12.4"), `printf '${HEALTHY_ROWS}'`);
    const { unfit, sink } = await fitness({ ...noSystem, PATH });
    expect(unfit).toBeUndefined();
    expect(lineOf(sink, "cuda")["message"]).toBe("fitness cuda: CUDA 12.4 (driver 550.54.15; needs 11.8)");
    expect(lineOf(sink, "gpu")["message"]).toBe(
      "fitness gpu: 2 device(s): 0 NVIDIA H100 80GB HBM3 (1/81559 MiB used); 1 NVIDIA H100 80GB HBM3 (3/81559 MiB used); " +
        "allocation not tested (no gpu_test binary; docs/fitness.md)",
    );
  });

  it("fails cuda when the driver is older than RUNPOD_MIN_CUDA_VERSION", async () => {
    const PATH = await standIn("old", SUMMARY("11.4"), `printf '${HEALTHY_ROWS}'`);
    expect((await fitness({ ...noSystem, PATH })).unfit).toEqual({
      check: "cuda",
      reason: "the driver (550.54.15) supports CUDA 11.4, 11.8 required (RUNPOD_MIN_CUDA_VERSION)",
    });
    expect((await fitness({ ...noSystem, PATH, RUNPOD_MIN_CUDA_VERSION: "11.2" })).unfit).toBeUndefined();
  });

  it("fails gpu naming the device that reports an error", async () => {
    const PATH = await standIn(
      "failing",
      SUMMARY("12.4"),
      `printf '0, NVIDIA H100 80GB HBM3, 81559, 1, Default, 0\\n1, NVIDIA H100 80GB HBM3, [Unknown Error], [Unknown Error], Default, [Unknown Error]\\n'`,
    );
    const { unfit } = await fitness({ ...noSystem, PATH });
    expect(unfit?.check).toBe("gpu");
    expect(unfit?.reason).toMatch(/^GPU 1 \(NVIDIA H100 80GB HBM3\) reports an error: 1, NVIDIA H100/);
  });

  it("fails gpu when nvidia-smi hangs past RUNPOD_GPU_TEST_TIMEOUT, and leaves no process behind", async () => {
    const pidFile = join(tmp, "hang.pid");
    const PATH = await standIn("hang", SUMMARY("12.4"), `echo $$ > ${pidFile}; exec sleep 30`);
    const { unfit } = await fitness({ ...noSystem, PATH, RUNPOD_GPU_TEST_TIMEOUT: "0.5" });
    expect(unfit).toEqual({
      check: "gpu",
      reason:
        "nvidia-smi --query-gpu=index,name,memory.total,memory.used,compute_mode,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits did not finish within 0.5 s (RUNPOD_GPU_TEST_TIMEOUT)",
    });
    // The stand-in exec'd into sleep: that very process was killed, not left running for 30 s.
    const pid = Number((await readFile(pidFile, "utf8")).trim());
    await expect.poll(() => alive(pid)).toBe(false);
  });

  it("runs a gpu_test binary for the allocation test and fails on its error lines", async () => {
    const passing =
      "#!/bin/sh\necho 'CUDA Driver Version: 12.4'\necho 'Found 2 GPUs:'\necho 'GPU 0 memory allocation test passed.'\necho 'GPU 1 memory allocation test passed.'\n";
    const failing =
      "#!/bin/sh\necho 'Found 2 GPUs:'\necho 'GPU 0 memory allocation test passed.'\necho 'GPU 1: cudaMalloc failed: out of memory'\n";
    // As a real gpu_test fails (seen on an H200 with a stand-in binary): its count first, the failure after, exit 1.
    const exiting =
      "#!/bin/sh\necho 'Found 1 GPUs'\necho 'GPU 0 memory allocation test failed: out of memory'\nexit 1\n";
    const PATH = await standIn("alloc", SUMMARY("12.4"), `printf '${HEALTHY_ROWS}'`, {
      gpu_test: passing,
      gpu_test_bad: failing,
      gpu_test_exit: exiting,
    });
    const good = await fitness({ ...noSystem, PATH });
    expect(lineOf(good.sink, "gpu")["message"]).toMatch(/allocation passed on 2 by .*alloc\/gpu_test$/);
    const bad = await fitness({
      ...noSystem,
      PATH,
      RUNPOD_BINARY_GPU_TEST_PATH: join(tmp, "alloc", "gpu_test_bad"),
    });
    expect(bad.unfit).toEqual({
      check: "gpu",
      reason: "the GPU memory allocation test failed: GPU 1: cudaMalloc failed: out of memory",
    });
    const exited = await fitness({
      ...noSystem,
      PATH,
      RUNPOD_BINARY_GPU_TEST_PATH: join(tmp, "alloc", "gpu_test_exit"),
    });
    expect(exited.unfit?.reason).toMatch(
      /alloc\/gpu_test_exit exited 1: GPU 0 memory allocation test failed: out of memory$/,
    );
  });

  it("skips the device check with RUNPOD_SKIP_GPU_CHECK=true", async () => {
    const PATH = await standIn("skip", SUMMARY("12.4"), "exit 9");
    expect((await fitness({ ...noSystem, PATH })).unfit?.check).toBe("gpu");
    const { unfit, lines } = await fitness({ ...noSystem, PATH, RUNPOD_SKIP_GPU_CHECK: "true" });
    expect(unfit).toBeUndefined();
    expect(lines.map((l) => l["fitness"])).toEqual(["memory", "disk", "network", "cuda"]);
  });
});

describe("fitness in the worker", () => {
  function workerEnv(h: Harness, podId: string, extra: Record<string, string>) {
    return { ...h.workerEnv("local", { podId }), RUNPOD_ENDPOINT_ID: "local", PATH: noGpuPath, ...extra };
  }

  it("runs the user's healthCheck after the built-ins, and only when they passed", async () => {
    await using h = await testHarness();
    const calls: string[] = [];
    const definition = defineHandler({
      healthCheck: () => {
        calls.push("healthCheck");
        throw new WorkerUnfitError("weights", "model.onnx is missing");
      },
      handler: () => "never",
    });
    const passing = await fitness(passingEnv(harnessPort(h)), definition);
    expect(passing.unfit).toEqual({ check: "weights", reason: "model.onnx is missing" });
    expect(passing.lines.map((l) => [l["fitness"], l["status"]]).slice(-1)).toEqual([["weights", "failed"]]);
    expect(calls).toEqual(["healthCheck"]);
    const failing = await fitness({ RUNPOD_MIN_MEMORY_GB: "1000000" }, definition);
    expect(failing.unfit?.check).toBe("memory");
    expect(calls).toEqual(["healthCheck"]);
  });

  it("pings unhealthy once with check=disk and the reason, takes no job, and stops with exit code 1", async () => {
    await using h = await testHarness();
    const w = await startWorker(handler, {
      env: workerEnv(h, "pod-disk", { RUNPOD_MIN_DISK_PERCENT: "100", RUNPOD_MIN_MEMORY_GB: "0" }),
      logDestination: logSink().stream,
      fitnessChecks: true,
      shutdownGraceMs: 1_000,
      flushTimeoutMs: 1_000,
    });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const pings = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(pings.map((p) => p.query["check"])).toEqual(["disk"]);
    expect(pings[0]?.query["reason"]).toMatch(/ 100 % required \(RUNPOD_MIN_DISK_PERCENT\)$/);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  });

  it("runs no built-in check unless the worker asks for them (startWorker's default; runlet start turns them on)", async () => {
    await using h = await testHarness();
    const sink = logSink();
    const w = await startWorker(handler, {
      env: workerEnv(h, "pod-off", { RUNPOD_MIN_MEMORY_GB: "1000000" }),
      logDestination: sink.stream,
    });
    const id = h.enqueue("local", { input: {} });
    expect((await h.waitForJob(id)).status).toBe("COMPLETED");
    await w.close();
    expect(sink.lines.filter((l) => l["fitness"] !== undefined)).toEqual([]);
  });

  it("makes `runlet start` exit 1 after one unhealthy ping naming the check", async () => {
    await using h = await testHarness();
    const child = startRunletChild(h, "test/fixtures/echo-plain.mjs", {
      podId: "pod-memory",
      env: {
        RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "false",
        RUNPOD_MIN_MEMORY_GB: "1000000",
        RUNPOD_ENDPOINT_ID: "local",
      },
    });
    try {
      expect(await child.exited, child.output()).toEqual({ code: 1, signal: null });
    } finally {
      await stopRunletChild(child);
    }
    const pings = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(pings.map((p) => [p.path, p.query["check"]])).toEqual([["/v2/local/ping/pod-memory", "memory"]]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
    expect(child.output()).toContain("1000000 GB required (RUNPOD_MIN_MEMORY_GB)");
  });
});

describe("runlet dev", () => {
  it("shows each check's line from its workers, with the thresholds of its own environment", async () => {
    const dir = join(tmp, "dev");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "package.json"), '{"type": "module"}\n');
    await writeFile(
      join(dir, "handler.ts"),
      `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};\nexport default defineHandler({ handler: () => "ok" });\n`,
    );
    const env = childEnv({
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "false",
      RUNPOD_MIN_MEMORY_GB: "0.5",
      RUNPOD_MIN_DISK_PERCENT: "0",
      RUNPOD_NETWORK_CHECK_TARGET: "off",
    });
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: dir, env });
    try {
      await dev.waitFor(/\[w1\] INFO {2}fitness memory: .*needs 0\.5 GB\)/);
      await dev.waitFor(/\[w1\] INFO {2}fitness disk: /);
      await dev.waitFor(/\[w1\] INFO {2}fitness network: skipped, RUNPOD_NETWORK_CHECK_TARGET=off/);
      await dev.waitFor(/\[w1\] INFO {2}fitness checks passed in \d+ ms/);
    } finally {
      await dev.stop();
    }
  });

  it("`runlet test` runs one job without them, as the Python SDK's test mode does", async () => {
    const r = await runCli(["test", "test/fixtures/echo-plain.mjs", "--input", '{"input": {}}'], {
      env: childEnv({ RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "false", RUNPOD_MIN_MEMORY_GB: "1000000" }),
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain("fitness memory");
  });
});
