import { isRunletError } from "../errors.js";
import type { HealthCheck } from "../handler/define-handler.js";
import { WorkerUnfitError } from "../handler/unfit.js";
import { type CachedModelOptions, resolveCachedModel } from "./hf-cache.js";

/** The unhealthy ping's check name for a model the cache does not hold. */
export const MODEL_CHECK = "model";

/** One model a worker needs: its repository id and what to resolve of it. */
export interface RequiredModel extends CachedModelOptions {
  readonly repo: string;
}

/**
 * A `healthCheck` (docs/fitness.md, "Cached models") that resolves each model in the cache: one
 * that is missing makes the worker unfit (`check=model`, the reason listing what the cache holds)
 * before its first take, so a worker without its model never takes a job.
 *
 * @example
 * defineHandler({ healthCheck: cachedModelCheck({ repo: "org/name", file: "model.onnx" }), ... })
 */
export function cachedModelCheck(models: RequiredModel | readonly RequiredModel[]): HealthCheck {
  const list: readonly RequiredModel[] = Array.isArray(models) ? models : [models as RequiredModel];
  return async () => {
    for (const { repo, ...options } of list) {
      try {
        await resolveCachedModel(repo, options);
      } catch (err) {
        if (isRunletError(err)) throw new WorkerUnfitError(MODEL_CHECK, err.message, { cause: err });
        throw err;
      }
    }
  };
}
