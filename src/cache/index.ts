export {
  type CacheDir,
  checkWarmCacheOptions,
  defaultDirName,
  WARM_CACHE_DEFAULTS,
  type WarmCacheDir,
  type WarmCacheOptions,
  type WarmCacheSettings,
} from "./cache-options.js";
export {
  MANIFEST_NAME,
  MANIFEST_VERSION,
  type Manifest,
  type ManifestEntry,
  readManifest,
  safeJoin,
} from "./manifest.js";
export { hydrateWarmCache } from "./start-cache.js";
export { type CacheRun, WarmCache, type WarmCacheLimits } from "./warm-cache.js";
