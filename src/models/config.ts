/**
 * Where the platform's cached models are (docs/models.md, "Cached models"), read from the
 * environment here and nowhere else: the platform places a model chosen for the endpoint under
 * `/runpod-volume/huggingface-cache/hub` before the worker starts; `RUNLET_HF_CACHE` points runlet
 * at another folder laid out the same way (a local copy under `runlet dev`, a test's folder).
 */

/** The platform's cache of Hugging Face models (serverless/endpoints/model-caching). */
export const PLATFORM_HF_CACHE = "/runpod-volume/huggingface-cache/hub";

/** The variable that points runlet at another cache folder. */
export const HF_CACHE_ENV = "RUNLET_HF_CACHE";

/** The environment a model function reads when none is given: the process's. */
export function processEnv(): Readonly<Record<string, string | undefined>> {
  return process.env;
}

/** The cache folder: `RUNLET_HF_CACHE` when set, else the platform's. */
export function hfCacheDir(env: Readonly<Record<string, string | undefined>> = processEnv()): string {
  const dir = env[HF_CACHE_ENV]?.trim() ?? "";
  return dir === "" ? PLATFORM_HF_CACHE : dir;
}
