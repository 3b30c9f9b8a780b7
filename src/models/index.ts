export { cachedModelCheck, MODEL_CHECK, type RequiredModel } from "./cached-model-check.js";
export { cachedModelEnv } from "./cached-model-env.js";
export { HF_CACHE_ENV, hfCacheDir, PLATFORM_HF_CACHE } from "./config.js";
export {
  type CachedModel,
  type CachedModelOptions,
  cacheFolderName,
  resolveCachedModel,
} from "./hf-cache.js";
export { HF_HUB_URL, type HfSource, hfDownloadUrl, isHfSource, parseHfSource } from "./hf-source.js";
