import { hfCacheDir } from "./config.js";

/**
 * The environment a sidecar needs to load the platform's cached model and never reach for the
 * network (docs/models.md, "Cached models"): Hugging Face's libraries (vLLM, text-generation
 * servers, transformers) look in `HF_HUB_CACHE` for `models--{org}--{name}` and follow
 * `refs/main`, so a sidecar started with `--model org/name` finds the snapshot; offline, a model
 * that is not there fails at once instead of downloading for minutes.
 *
 * @example
 * sidecar: { name: "vllm", command: ["vllm", "serve", "org/name"], env: cachedModelEnv(), ready: { url: "http://127.0.0.1:8000/health" } }
 */
export function cachedModelEnv(
  options: { readonly cacheDir?: string; readonly env?: Readonly<Record<string, string | undefined>> } = {},
): Record<string, string> {
  return {
    HF_HUB_CACHE: options.cacheDir ?? hfCacheDir(options.env),
    HF_HUB_OFFLINE: "1",
    TRANSFORMERS_OFFLINE: "1",
    HF_DATASETS_OFFLINE: "1",
    HF_HUB_DISABLE_TELEMETRY: "1",
  };
}
