import { defineHandler, JobError } from "runlet";
import { z } from "zod";
import { BadInputError, infer, loadModel } from "./model.js";

/** Most rows one job may send. */
const MAX_ROWS = 1_024;

/** Rows of numbers in (one per batch item), the model's output rows out. */
const input = z.object({
  rows: z.array(z.array(z.number()).min(1).max(4_096)).min(1).max(MAX_ROWS),
});

export default defineHandler({
  input,
  // One session serves every job. ORT runs each call on its own thread pool (all cores by
  // default), so one job at a time keeps each job's latency low; raise it for small models
  // whose runs leave cores idle (node_modules/runlet/docs/models.md).
  concurrency: 1,
  setupTimeoutMs: 120_000,
  // The model loads once, before the worker's first take: no job waits for it, and a worker
  // whose model cannot load takes no job (it reports itself unfit with setup's error).
  async setup({ log, progress, signal }) {
    progress("creating the onnxruntime session");
    // MODEL_PATH=hf:org/name/model.onnx takes the endpoint's cached model (README, "A model from Hugging Face").
    const model = await loadModel({ signal });
    log.info({ source: model.source, input: model.input, output: model.output }, "model loaded");
    return { model };
  },
  // At shutdown, after the last job: the session's native memory goes back.
  async teardown({ model }) {
    await model.release();
  },
  async handler({ input, state }) {
    try {
      return { rows: await infer(state.model, input.rows) };
    } catch (err) {
      if (err instanceof BadInputError) throw new JobError(err.message);
      throw err;
    }
  },
});
