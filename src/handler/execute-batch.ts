import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import type { DeliveredJob } from "../protocol/index.js";
import type { BatchJob } from "./batch-types.js";
import type { HandlerDefinition } from "./define-handler.js";
import { type ExecuteOutcome, isIterator } from "./execute.js";
import { createJobMetrics, type JobMetrics } from "./metrics.js";
import { failedResult, type JobResult, type ReportIdentity, returnedResult, toJsonText } from "./outcome.js";
import { type ParsedInput, parseInput } from "./parse-input.js";
import { type Unfitness, unfitnessOf } from "./unfit.js";

/**
 * Runs one batch through a batch handler and turns what it did into one outcome per job. The same
 * code runs in-process and inside an isolation thread (as executeJob does for one job).
 */

/** Why a generator batch handler is refused (at definition, or when a function returns one). */
export const STREAMING_REFUSED =
  "a batch handler cannot be a generator: streaming from a batch is not supported (return one output per job; use defineHandler to stream)";

/** One job of a batch, as the runner hands it over. */
export interface BatchMember {
  readonly job: DeliveredJob;
  /** The input as validated when the job was admitted (in-process); undefined: validated here (a thread). */
  readonly parsed?: ParsedInput | undefined;
  /** This job's own signal. */
  readonly signal: AbortSignal;
  readonly deadline: number;
  readonly log: Logger;
  /** Where this job's progress goes, as JSON text. */
  readonly progress: (json: string) => void;
}

/** Everything {@link executeBatch} needs. */
export interface ExecuteBatchOptions {
  /** A definition with `batch` set. */
  readonly definition: HandlerDefinition;
  readonly batchId: string;
  readonly members: readonly BatchMember[];
  /** The batch's signal: fires when no job of it is still wanted. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly identity: ReportIdentity;
  /** `ctx.state`: what setup returned where this batch runs. */
  readonly state: unknown;
}

/**
 * The outputs a batch handler returned, checked: an array with one place per job. Throws
 * RUNLET_BATCH_OUTPUTS (the batch then fails) when it is anything else.
 */
export function batchOutputsOf(returned: unknown, count: number): readonly unknown[] {
  if (isIterator(returned)) throw new RunletError("RUNLET_BATCH_OUTPUTS", STREAMING_REFUSED);
  if (!Array.isArray(returned)) {
    throw new RunletError(
      "RUNLET_BATCH_OUTPUTS",
      `the batch handler must return an array with one output per job (${count}), got ${returned === null ? "null" : typeof returned}`,
    );
  }
  if (returned.length !== count) {
    throw new RunletError(
      "RUNLET_BATCH_OUTPUTS",
      `the batch handler returned ${returned.length} outputs for ${count} jobs; return exactly one per job, in order (a JobError in a job's place fails that job only)`,
    );
  }
  return returned;
}

/** Runs the batch; never rejects: a throw (or outputs of the wrong shape) fails every job with the reason. */
export async function executeBatch(options: ExecuteBatchOptions): Promise<ExecuteOutcome[]> {
  const { definition, members, identity, log } = options;
  const stopPod = definition.refreshWorker;
  const batch = definition.batch;
  const outcomes: (ExecuteOutcome | undefined)[] = members.map(() => undefined);
  // A job whose input fails here (only when a thread validates again) fails alone, outside the call.
  const runs: { index: number; input: unknown; metrics: JobMetrics }[] = [];
  for (const [index, member] of members.entries()) {
    const parsed = member.parsed ?? (await parseInput(definition.input, member.job.input));
    if (parsed.ok) runs.push({ index, input: parsed.data, metrics: createJobMetrics() });
    else {
      const result: JobResult = {
        kind: "error",
        message: parsed.message,
        code: "RUNLET_INPUT_INVALID",
        stopPod,
      };
      outcomes[index] = { result, metrics: {} };
    }
  }
  const failAll = (err: unknown, unfit: Unfitness | undefined): void => {
    log.warn({ err }, "the batch handler failed; every job of the batch fails with its reason");
    for (const run of runs) {
      const result = failedResult(err, identity, stopPod || unfit !== undefined);
      outcomes[run.index] = {
        result,
        metrics: run.metrics.toJSON(),
        ...(unfit === undefined ? {} : { unfit }),
      };
    }
  };
  if (batch === undefined) {
    failAll(
      new RunletError("RUNLET_HANDLER_INVALID", "executeBatch needs a defineBatchHandler() definition"),
      undefined,
    );
  } else if (runs.length > 0) {
    const jobs: BatchJob[] = runs.map(({ index, metrics }) => {
      const member = members[index]!;
      return {
        id: member.job.id,
        raw: member.job,
        signal: member.signal,
        deadline: member.deadline,
        log: member.log,
        metrics,
        progress: (value: unknown) => member.progress(toJsonText(value, "a progress value")),
      };
    });
    try {
      const returned = await batch.handler({
        inputs: runs.map((run) => run.input),
        jobs,
        signal: options.signal,
        log,
        state: options.state,
        batch: { id: options.batchId, size: runs.length },
      });
      const places = batchOutputsOf(returned, runs.length);
      for (const [at, run] of runs.entries())
        outcomes[run.index] = placeOutcome(places[at], run.metrics, identity, stopPod);
    } catch (err) {
      failAll(err, unfitnessOf(err));
    }
  }
  return outcomes.map(
    (outcome) => outcome ?? { result: failedResult(new Error("no outcome"), identity, stopPod), metrics: {} },
  );
}

/** One job's outcome from its place in the outputs: an Error there fails that job only. */
function placeOutcome(
  place: unknown,
  metrics: JobMetrics,
  identity: ReportIdentity,
  stopPod: boolean,
): ExecuteOutcome {
  if (!(place instanceof Error)) return { result: returnedResult(place, stopPod), metrics: metrics.toJSON() };
  const unfit = unfitnessOf(place);
  const result = failedResult(place, identity, stopPod || unfit !== undefined);
  return { result, metrics: metrics.toJSON(), ...(unfit === undefined ? {} : { unfit }) };
}
