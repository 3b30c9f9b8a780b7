import type { FitnessCheck } from "./check.js";
import type { FitnessConfig } from "./fitness-config.js";
import { cudaCheck, type GpuProbe, gpuCheck, probeGpu } from "./gpu-checks.js";
import { diskCheck, memoryCheck, networkCheck } from "./system-checks.js";

/**
 * The built-in checks for `config`, in their order: memory, disk, network, cuda (all skipped by
 * RUNPOD_SKIP_AUTO_SYSTEM_CHECKS), gpu (skipped by RUNPOD_SKIP_GPU_CHECK). The GPU is probed once,
 * on first use, for both GPU checks.
 */
export function builtInChecks(config: FitnessConfig, closing: AbortSignal): FitnessCheck[] {
  let probed: Promise<GpuProbe> | undefined;
  const probe = () => {
    probed ??= probeGpu(config, closing);
    return probed;
  };
  const checks: FitnessCheck[] = [];
  if (!config.skipSystemChecks) {
    checks.push(memoryCheck(config), diskCheck(config), networkCheck(config), cudaCheck(config, probe));
  }
  if (!config.skipGpuCheck) checks.push(gpuCheck(config, probe));
  return checks;
}
