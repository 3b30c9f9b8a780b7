import { isRunletError, RunletError } from "../errors.js";

/**
 * Unfitness (docs/protocol.md, "Unfit workers"): a worker that finds itself unfit pings once with
 * `status=unhealthy&check=<name>&reason=<text>` and exits 1. A failed `healthCheck` or a thrown
 * {@link WorkerUnfitError} says so; the worker does the ping and the exit.
 */

/** What the unhealthy ping carries. */
export interface Unfitness {
  /** The `check` query parameter: which check failed. */
  readonly check: string;
  /** The `reason` query parameter. */
  readonly reason: string;
}

/** The `check` name when a health check fails with an error that names none. */
export const DEFAULT_CHECK_NAME = "healthCheck";
/** Longest `reason` sent in the ping (query strings have practical limits). */
const MAX_REASON_CHARS = 500;

/**
 * Throw from a handler or a `healthCheck` to declare this worker unfit: the job (if any) fails with
 * the message, the worker pings `status=unhealthy&check=<check>&reason=<message>` once, stops, and
 * exits 1 so the platform replaces it.
 *
 * @example
 * if (!gpuAvailable()) throw new WorkerUnfitError("gpu", "CUDA device lost");
 */
export class WorkerUnfitError extends RunletError {
  /** The failed check's name. */
  readonly check: string;

  constructor(check: string, reason: string, options: { cause?: unknown } = {}) {
    super("RUNLET_WORKER_UNFIT", reason, { ...options, details: { check } });
    this.name = "WorkerUnfitError";
    this.check = check;
  }
}

/** The unfitness a thrown value declares: a WorkerUnfitError (by code, so across package copies), else undefined. */
export function unfitnessOf(thrown: unknown): Unfitness | undefined {
  if (!isRunletError(thrown) || thrown.code !== "RUNLET_WORKER_UNFIT") return undefined;
  const check = (thrown as { check?: unknown }).check;
  return {
    check: typeof check === "string" && check !== "" ? check : DEFAULT_CHECK_NAME,
    reason: thrown.message.slice(0, MAX_REASON_CHARS),
  };
}

/** The unfitness of a failed health check: its WorkerUnfitError's check, else {@link DEFAULT_CHECK_NAME} and the error's message. */
export function healthCheckFailure(thrown: unknown): Unfitness {
  const declared = unfitnessOf(thrown);
  if (declared !== undefined) return declared;
  const message =
    thrown instanceof Error ? thrown.message : typeof thrown === "string" ? thrown : String(thrown);
  return {
    check: DEFAULT_CHECK_NAME,
    reason: (message || "the health check failed").slice(0, MAX_REASON_CHARS),
  };
}
