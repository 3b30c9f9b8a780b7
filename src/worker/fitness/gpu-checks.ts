import { spawn } from "node:child_process";
import { access, constants } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { onAbort } from "../../linked-signal.js";
import { type CheckOutcome, type FitnessCheck, FitnessFailure } from "./check.js";
import type { FitnessConfig } from "./fitness-config.js";

/**
 * The GPU checks (docs/fitness.md, "GPU checks"), through what a GPU image already has: `nvidia-smi`
 * for the driver's CUDA version and every device's state, and a gpu_test-style allocation binary
 * when the image carries one. A Node worker cannot allocate GPU memory without a compiled CUDA
 * program or FFI into the driver library, so runlet runs such a binary when present and never
 * ships or compiles one. A machine without `nvidia-smi` and without /dev/nvidia* is CPU-only: the
 * checks skip without a word above debug.
 */

/** What a tool run gave. */
interface ToolRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Longest output kept from one tool run (a device table is a few KiB). */
const MAX_TOOL_OUTPUT_BYTES = 1_048_576; // 1 MiB

/**
 * Runs `file` with the worker's environment, bounded by `timeoutMs`; ENOENT resolves undefined. It
 * leads a process group of its own, and the whole group is killed when it times out (or the
 * checks are cut short) and when it exits: a hung `nvidia-smi` may have started helpers of its
 * own, and one of them left holding its output pipe would otherwise outlive the bound and hold
 * the run open until it ended.
 */
function runTool(
  file: string,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ToolRun | undefined> {
  const command = [file, ...args].join(" ");
  const late = (): FitnessFailure =>
    new FitnessFailure(`${command} did not finish within ${timeoutMs / 1000} s (RUNPOD_GPU_TEST_TIMEOUT)`);
  if (signal.aborted) return Promise.reject(late());
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: { ...env }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const killGroup = (): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // ESRCH: the group is already empty, which is what was wanted.
      }
    };
    let settled = false;
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      unsubscribe();
      settle();
    };
    const cutShort = (): void => {
      killGroup();
      finish(() => reject(late()));
    };
    const timer = setTimeout(cutShort, timeoutMs);
    const unsubscribe = onAbort(signal, cutShort);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let bytes = 0;
    const keep = (into: Buffer[]) => (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= MAX_TOOL_OUTPUT_BYTES) {
        into.push(chunk);
        return;
      }
      killGroup();
      finish(() => reject(new FitnessFailure(`${command} printed more than ${MAX_TOOL_OUTPUT_BYTES} bytes`)));
    };
    child.stdout.on("data", keep(stdout));
    child.stderr.on("data", keep(stderr));
    child.once("error", (err: NodeJS.ErrnoException) => {
      killGroup();
      finish(() =>
        err.code === "ENOENT"
          ? resolve(undefined)
          : reject(new FitnessFailure(`${file} could not run: ${err.message}`, { cause: err })),
      );
    });
    // What it left running in its group goes with it; its output then ends ("close").
    child.once("exit", killGroup);
    child.once("close", (code, killedBy) => {
      finish(() =>
        code === null
          ? reject(new FitnessFailure(`${command} was killed by ${killedBy}`))
          : resolve({
              code,
              stdout: Buffer.concat(stdout).toString("utf8"),
              stderr: Buffer.concat(stderr).toString("utf8"),
            }),
      );
    });
  });
}

function firstLine(text: string): string {
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .find((l) => l !== "") ?? "no output"
  ).slice(0, 200);
}

/** Whether the kernel exposes NVIDIA device nodes (a GPU is attached even if its tools fail). */
async function hasDeviceNodes(devRoot: string): Promise<boolean> {
  for (const name of ["nvidiactl", "nvidia0"]) {
    try {
      await access(join(devRoot, name));
      return true;
    } catch {
      // Not this node; try the next.
    }
  }
  return false;
}

/** The GPU as `nvidia-smi` reports it, probed once for every GPU check. */
export type GpuProbe =
  | { readonly kind: "none"; readonly why: string }
  | { readonly kind: "present"; readonly summary: string }
  | { readonly kind: "broken"; readonly reason: string };

/** Probes for a GPU the Python SDK's way (`nvidia-smi` runs and says NVIDIA-SMI), plus /dev/nvidia*. */
export async function probeGpu(
  config: FitnessConfig,
  signal: AbortSignal,
  devRoot = "/dev",
): Promise<GpuProbe> {
  const run = await runTool("nvidia-smi", [], config.toolEnv, config.gpuTestTimeoutMs, signal).catch(
    (err: unknown) => err as FitnessFailure,
  );
  const devices = await hasDeviceNodes(devRoot);
  if (run instanceof Error) return { kind: "broken", reason: run.message };
  if (run === undefined) {
    return devices
      ? {
          kind: "broken",
          reason: "NVIDIA devices are attached but nvidia-smi is not on PATH, so they cannot be checked",
        }
      : { kind: "none", why: "no nvidia-smi and no /dev/nvidia*" };
  }
  if (run.code === 0 && run.stdout.includes("NVIDIA-SMI")) return { kind: "present", summary: run.stdout };
  if (!devices) return { kind: "none", why: `nvidia-smi exited ${run.code} and no /dev/nvidia*` };
  return { kind: "broken", reason: `nvidia-smi exited ${run.code}: ${firstLine(run.stderr || run.stdout)}` };
}

/** `[major, minor]` from text like `CUDA Version: 12.2`; undefined when absent. */
export function cudaVersionOf(summary: string): [number, number] | undefined {
  const m = /CUDA Version:\s*(\d+)\.(\d+)/.exec(summary);
  return m === null ? undefined : [Number(m[1]), Number(m[2])];
}

/** CUDA: the driver supports at least RUNPOD_MIN_CUDA_VERSION. */
export function cudaCheck(config: FitnessConfig, probe: () => Promise<GpuProbe>): FitnessCheck {
  return {
    name: "cuda",
    async run(): Promise<CheckOutcome> {
      const p = await probe();
      if (p.kind === "none") return { status: "skipped", figure: `no GPU (${p.why})` };
      if (p.kind === "broken") throw new FitnessFailure(p.reason);
      const [wantMajor, wantMinor] = config.minCudaVersion;
      const want = `${wantMajor}.${wantMinor}`;
      const found = cudaVersionOf(p.summary);
      const driver = /Driver Version:\s*([\d.]+)/.exec(p.summary)?.[1] ?? "unknown";
      // As the Python SDK does: a version that cannot be read is logged, not fatal.
      if (found === undefined)
        return { status: "skipped", figure: "nvidia-smi names no CUDA version; not checked" };
      const [major, minor] = found;
      const fields = { cuda: `${major}.${minor}`, driver, min: want };
      if (major < wantMajor || (major === wantMajor && minor < wantMinor)) {
        throw new FitnessFailure(
          `the driver (${driver}) supports CUDA ${major}.${minor}, ${want} required (RUNPOD_MIN_CUDA_VERSION)`,
        );
      }
      return { status: "passed", figure: `CUDA ${major}.${minor} (driver ${driver}; needs ${want})`, fields };
    },
  };
}

const QUERY = "index,name,memory.total,memory.used,compute_mode,ecc.errors.uncorrected.volatile.total";
/** Values nvidia-smi prints in place of a figure when a device misbehaves. */
const DEVICE_ERROR = /\[(Unknown Error|GPU requires reset|GPU is lost|Not Found)\]|ERR!/i;

/** Checks each row of the device query; returns the devices' one-line descriptions or throws naming the bad one. */
export function checkDeviceRows(stdout: string): string[] {
  const rows = stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  if (rows.length === 0) throw new FitnessFailure("nvidia-smi lists no GPU");
  return rows.map((row) => {
    const [index = "?", name = "?", total = "", used = "", mode = "", ecc = ""] = row
      .split(",")
      .map((f) => f.trim());
    if (DEVICE_ERROR.test(row)) throw new FitnessFailure(`GPU ${index} (${name}) reports an error: ${row}`);
    const totalMiB = Number(total);
    if (!(totalMiB > 0))
      throw new FitnessFailure(`GPU ${index} (${name}) reports no memory (memory.total=${total})`);
    if (/prohibited/i.test(mode))
      throw new FitnessFailure(`GPU ${index} (${name}) is in compute mode Prohibited`);
    if (Number(ecc) > 0) throw new FitnessFailure(`GPU ${index} (${name}) has ${ecc} uncorrected ECC errors`);
    return `${index} ${name} (${used}/${totalMiB} MiB used)`;
  });
}

/** The lines of a gpu_test-style output that say something failed (at most 10, each at most 200 characters). */
function errorLines(output: string): string[] {
  return output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /failed|error|cannot|unable/i.test(l))
    .slice(0, 10)
    .map((l) => l.slice(0, 200));
}

/** Parses a gpu_test-style output: `Found N GPUs`, one `memory allocation test passed` per GPU, no error lines. */
export function checkGpuTestOutput(stdout: string): number {
  const found = Number(/Found (\d+) GPUs?/i.exec(stdout)?.[1] ?? 0);
  const passed = stdout.split("\n").filter((l) => /memory allocation test passed/i.test(l)).length;
  const errors = errorLines(stdout);
  if (errors.length > 0 || passed === 0 || passed !== found) {
    const why = errors.join("; ") || `${passed} of ${found} GPUs passed`;
    throw new FitnessFailure(`the GPU memory allocation test failed: ${why}`);
  }
  return passed;
}

/** The allocation binary to run: RUNPOD_BINARY_GPU_TEST_PATH, else an executable `gpu_test` on PATH. */
async function gpuTestBinary(config: FitnessConfig): Promise<string | undefined> {
  if (config.gpuTestBinary !== undefined) return config.gpuTestBinary;
  for (const dir of (config.toolEnv["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    try {
      await access(join(dir, "gpu_test"), constants.X_OK);
      return join(dir, "gpu_test");
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

/** GPU: every device answers nvidia-smi's query sanely and, where a gpu_test binary exists, allocates memory. */
export function gpuCheck(config: FitnessConfig, probe: () => Promise<GpuProbe>): FitnessCheck {
  return {
    name: "gpu",
    async run(signal): Promise<CheckOutcome> {
      const p = await probe();
      if (p.kind === "none") return { status: "skipped", figure: `no GPU (${p.why})` };
      if (p.kind === "broken") throw new FitnessFailure(p.reason);
      const args = [`--query-gpu=${QUERY}`, "--format=csv,noheader,nounits"];
      const run = await runTool("nvidia-smi", args, config.toolEnv, config.gpuTestTimeoutMs, signal);
      if (run === undefined) throw new FitnessFailure("nvidia-smi disappeared between two calls");
      if (run.code !== 0) {
        throw new FitnessFailure(
          `nvidia-smi --query-gpu exited ${run.code}: ${firstLine(run.stderr || run.stdout)}`,
        );
      }
      const devices = checkDeviceRows(run.stdout);
      const binary = await gpuTestBinary(config);
      let allocation = "allocation not tested (no gpu_test binary; docs/fitness.md)";
      if (binary !== undefined) {
        const test = await runTool(binary, [], config.toolEnv, config.gpuTestTimeoutMs, signal);
        if (test === undefined)
          throw new FitnessFailure(`RUNPOD_BINARY_GPU_TEST_PATH names ${binary}, which does not exist`);
        if (test.code !== 0) {
          // The lines that say what failed, wherever the binary wrote them: a gpu_test prints
          // "Found N GPUs" first and its failure after it, so the first line alone says nothing.
          const why = errorLines(`${test.stderr}\n${test.stdout}`).join("; ");
          throw new FitnessFailure(
            `${binary} exited ${test.code}: ${why || firstLine(test.stderr || test.stdout)}`,
          );
        }
        allocation = `allocation passed on ${checkGpuTestOutput(test.stdout)} by ${binary}`;
      }
      return {
        status: "passed",
        figure: `${devices.length} device(s): ${devices.join("; ")}; ${allocation}`,
        fields: { devices: devices.length },
      };
    },
  };
}
