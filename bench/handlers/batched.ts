import { createDevice, DEFAULT_COST } from "../../examples/batched-embeddings/device.js";
import { defineBatchHandler } from "../../src/index.js";

/**
 * The batching bench's handler: examples/batched-embeddings' simulated device (20 ms a call plus
 * 0.2 ms an input) behind a batch handler whose `maxSize` and `maxWaitMs` come from
 * BENCH_BATCH_SIZE and BENCH_BATCH_WAIT_MS (bench-only knobs: one file serves every level).
 */
const device = createDevice(DEFAULT_COST);

export default defineBatchHandler({
  batch: {
    maxSize: Number(process.env["BENCH_BATCH_SIZE"] ?? "8"),
    maxWaitMs: Number(process.env["BENCH_BATCH_WAIT_MS"] ?? "10"),
  },
  handler: async ({ inputs, signal }) => {
    const vectors = await device.embed(
      inputs.map((input) => JSON.stringify(input)),
      4,
      signal,
    );
    return vectors.map((vector) => ({ vector }));
  },
});
