/**
 * The harness's catalog: a small fixed table in the shapes of the v2 document's `GpuType`,
 * `CpuType` and `DataCenter` (openapi/runpod-v2.json). The ids and pools are real ones of the
 * platform; prices and availability are placeholders, and the platform's live catalog has more
 * entries. `runlet deploy --gpu <type id>` resolves a type into its pool through this table when
 * it deploys to a harness.
 */

const AVAILABLE = [{ id: "US-KS-2", name: "US Kansas 2", availability: "HIGH" }];

function gpu(id: string, name: string, pool: string | null, memory: number) {
  return {
    id,
    name,
    pool,
    manufacturer: "NVIDIA",
    memory,
    secure: true,
    community: true,
    price: { secure: 0, community: 0, serverless: 0 },
    maxCount: { secure: 8, community: 4 },
    availability: "HIGH",
    dataCenters: AVAILABLE,
  };
}

/** GPU types and their serverless pools. */
export const CATALOG_GPUS = Object.freeze([
  gpu("NVIDIA RTX A4000", "RTX A4000", "AMPERE_16", 16),
  gpu("NVIDIA RTX A4500", "RTX A4500", "AMPERE_16", 20),
  gpu("NVIDIA RTX A5000", "RTX A5000", "AMPERE_24", 24),
  gpu("NVIDIA GeForce RTX 3090", "RTX 3090", "AMPERE_24", 24),
  gpu("NVIDIA GeForce RTX 4090", "RTX 4090", "ADA_24", 24),
  gpu("NVIDIA L4", "L4", "ADA_24", 24),
  gpu("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "ADA_48_PRO", 48),
  gpu("NVIDIA L40S", "L40S", "ADA_48_PRO", 48),
  gpu("NVIDIA L40", "L40", "ADA_48_PRO", 48),
  gpu("NVIDIA A100 80GB PCIe", "A100 PCIe", "AMPERE_80", 80),
  gpu("NVIDIA A100-SXM4-80GB", "A100 SXM", "AMPERE_80", 80),
  gpu("NVIDIA H100 80GB HBM3", "H100 SXM", "HOPPER_80", 80),
  gpu("NVIDIA H200", "H200 SXM", "HOPPER_141", 141),
  gpu("NVIDIA GeForce RTX 3070", "RTX 3070", null, 8),
]);

function cpu(id: string, name: string, group: string, ramGbPerVcpu: number) {
  return {
    id,
    name,
    group,
    vcpu: { min: 2, max: 32 },
    ramGbPerVcpu,
    price: { securePerVcpu: 0, serverlessPerVcpu: 0 },
    availability: "HIGH",
    dataCenters: AVAILABLE,
  };
}

/** CPU flavours. */
export const CATALOG_CPUS = Object.freeze([
  cpu("cpu3c", "Compute-Optimized", "Gen 3", 2),
  cpu("cpu3g", "General Purpose", "Gen 3", 4),
  cpu("cpu5c", "Compute-Optimized", "Gen 5", 2),
  cpu("cpu5g", "General Purpose", "Gen 5", 4),
]);

function dataCenter(id: string, name: string, region: string) {
  return {
    id,
    name,
    region,
    globalNetwork: true,
    networkVolumeTypes: ["STANDARD"],
    compliance: ["SOC_2_TYPE_2"],
  };
}

/** Data centers. */
export const CATALOG_DATA_CENTERS = Object.freeze([
  dataCenter("US-KS-2", "US Kansas 2", "NORTH_AMERICA"),
  dataCenter("US-TX-3", "US Texas 3", "NORTH_AMERICA"),
  dataCenter("EU-RO-1", "Europe Romania 1", "EUROPE"),
]);

/** RAM per vCPU of a CPU flavour, GB (an unknown flavour: 2). */
export function ramGbPerVcpu(flavourId: string): number {
  return CATALOG_CPUS.find((c) => c.id === flavourId)?.ramGbPerVcpu ?? 2;
}
