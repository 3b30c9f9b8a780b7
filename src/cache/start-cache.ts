import type { Logger } from "pino";
import type { WarmCacheSettings } from "./cache-options.js";
import { WarmCache, type WarmCacheLimits } from "./warm-cache.js";

/**
 * Step 2 of the worker's start-up (docs/fitness.md, "Warm cache"): hydrates the handler's warm
 * cache before setup. Resolves with the cache (whose `startSync()` the worker calls once setup is
 * done), or undefined without a `warmCache` option. Rejects only under `strict`.
 */
export async function hydrateWarmCache(
  settings: WarmCacheSettings | undefined,
  log: Logger,
  endpointId: string | undefined,
  closing?: AbortSignal,
  limits?: WarmCacheLimits,
): Promise<WarmCache | undefined> {
  if (settings === undefined) return undefined;
  const cache = new WarmCache(settings, log, endpointId, limits);
  await cache.hydrate(closing);
  return cache;
}
