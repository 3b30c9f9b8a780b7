export { builtInChecks } from "./built-in-checks.js";
export { type CheckOutcome, type FitnessCheck, FitnessFailure } from "./check.js";
export {
  DEFAULT_NETWORK_TARGET,
  type FitnessConfig,
  type NetworkTarget,
  readFitnessConfig,
} from "./fitness-config.js";
export {
  checkDeviceRows,
  checkGpuTestOutput,
  cudaCheck,
  cudaVersionOf,
  type GpuProbe,
  gpuCheck,
  probeGpu,
} from "./gpu-checks.js";
export { checkFitness, type FitnessDeps, runFitnessChecks } from "./run-fitness.js";
export {
  diskCheck,
  type MemoryReading,
  type MemorySources,
  memoryCheck,
  networkCheck,
  readMemory,
} from "./system-checks.js";
