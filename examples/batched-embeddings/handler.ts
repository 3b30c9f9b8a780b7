import { defineBatchHandler, JobError } from "runlet";
import { z } from "zod";
import { createDevice } from "./device.js";

/**
 * Dynamic batching: many jobs, one call. The device (device.ts) costs 20 ms a call plus 0.2 ms an
 * input, as a GPU pays its launch cost once per call, so 32 texts embedded together cost about
 * 26 ms where 32 calls of one cost 646 ms. runlet gathers the jobs it takes into batches of up to
 * 32, waiting at most 10 ms for a batch to fill, and each job still gets its own result. The
 * device is made once, in `setup`, as a real model would be loaded there: every batch gets it as
 * `state.device`.
 */

/** The longest text the stand-in model takes, in words (a job over it fails alone). */
export const MAX_WORDS = 512;

export default defineBatchHandler({
  input: z.object({
    text: z.string().min(1).max(100_000),
    /** Length of the vector. */
    dims: z.number().int().min(2).max(1_024).default(8),
  }),
  batch: { maxSize: 32, maxWaitMs: 10 },
  setup() {
    return { device: createDevice() };
  },
  async handler({ inputs, jobs, state, signal, log }) {
    // One call per vector length (a real model has one; this stand-in lets the client choose).
    const outputs = new Array<{ vector: number[]; words: number } | JobError>(inputs.length);
    const byDims = new Map<number, number[]>();
    for (const [at, input] of inputs.entries()) {
      const words = input.text.split(/\s+/).filter(Boolean).length;
      // A JobError in a job's place fails that job only; the rest of the batch goes on.
      if (words > MAX_WORDS)
        outputs[at] = new JobError(`text has ${words} words, over the ${MAX_WORDS}-word limit`);
      else byDims.set(input.dims, [...(byDims.get(input.dims) ?? []), at]);
    }
    for (const [dims, places] of byDims) {
      const vectors = await state.device.embed(
        places.map((at) => inputs[at]!.text),
        dims,
        signal,
      );
      for (const [i, at] of places.entries()) {
        jobs[at]!.metrics.set("batchSize", inputs.length);
        outputs[at] = { vector: vectors[i]!, words: inputs[at]!.text.split(/\s+/).filter(Boolean).length };
      }
    }
    log.debug({ size: inputs.length }, "embedded a batch");
    return outputs;
  },
});
