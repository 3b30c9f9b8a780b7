import { setTimeout as sleep } from "node:timers/promises";
import { defineBatchHandler, JobError } from "runlet";
import { z } from "zod";

/** What each job's `input` must look like. runlet checks every job alone before it joins a batch. */
const input = z.object({
  text: z.string().min(1).max(10_000),
});

/**
 * Stands in for your model: one call on many inputs costs about as much as one call on one (a
 * GPU's launch cost), so runlet hands the handler whole batches. Replace it with the real thing.
 */
async function model(texts: readonly string[], signal: AbortSignal): Promise<number[]> {
  await sleep(20 + 0.2 * texts.length, undefined, { signal });
  return texts.map((text) => text.length);
}

export default defineBatchHandler({
  input,
  // Up to 32 jobs a call; the first job of a batch waits at most 10 ms for the others.
  batch: { maxSize: 32, maxWaitMs: 10 },
  async handler({ inputs, signal, log }) {
    log.info({ size: inputs.length }, "running a batch");
    const scores = await model(
      inputs.map((i) => i.text),
      signal,
    );
    // One output per job, in order. A JobError in a job's place fails that job only.
    return inputs.map((i, at) =>
      i.text.trim() === "" ? new JobError("text is only whitespace") : { text: i.text, score: scores[at]! },
    );
  },
});
