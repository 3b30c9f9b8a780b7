import { isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { RunletError } from "../errors.js";
import {
  booleanOption,
  durationOption,
  integerOption,
  nonEmptyString,
  parseOptions,
} from "../option-schema.js";

/**
 * The warm cache's options (docs/fitness.md, "Warm cache"): which local folders travel through the
 * network volume, where the volume is, and the bounds of each transfer.
 */

/** One folder to cache: a path, or a path and the name its mirror has on the volume. */
export type WarmCacheDir = string | { readonly path: string; readonly name: string };

/** The handler's `warmCache` option. */
export interface WarmCacheOptions {
  /** Local folders to mirror (absolute paths), e.g. a model hub's cache; `{ path, name }` names its mirror on the volume. */
  dirs: readonly WarmCacheDir[];
  /** Where the network volume is mounted. @default "/runpod-volume" */
  volume?: string;
  /** The mirror's folder on the volume, one per endpoint. @default RUNPOD_ENDPOINT_ID (no cache without either) */
  namespace?: string;
  /** Files smaller than this travel packed in one archive; larger ones are copied one by one, in bytes. @default 262_144 (256 KiB) */
  smallFileBytes?: number;
  /** Large files copied at once. @default 8 */
  parallelCopies?: number;
  /** At shutdown, how long the last sync may run before it is abandoned, in ms (at most 2 147 483 647). @default 30_000 */
  shutdownSyncMs?: number;
  /** How long a hydrate may run, in ms (at most 2 147 483 647); past it the files restored stay and the rest start cold. @default 600_000 */
  hydrateTimeoutMs?: number;
  /** Fail the worker's start-up when hydrating fails, instead of a log line and a cold start. @default false */
  strict?: boolean;
}

/** One cached folder, resolved. */
export interface CacheDir {
  /** The folder in this container (absolute). */
  readonly path: string;
  /** Its mirror's name on the volume: a single safe path component. */
  readonly name: string;
}

/** The options, checked, with their defaults. */
export interface WarmCacheSettings {
  readonly dirs: readonly CacheDir[];
  readonly volume: string;
  readonly namespace: string | undefined;
  readonly smallFileBytes: number;
  readonly parallelCopies: number;
  readonly shutdownSyncMs: number;
  readonly hydrateTimeoutMs: number;
  readonly strict: boolean;
}

export const WARM_CACHE_DEFAULTS = Object.freeze({
  volume: "/runpod-volume",
  smallFileBytes: 262_144, // 256 KiB, the Python SDK's threshold
  parallelCopies: 8,
  shutdownSyncMs: 30_000, // the Python SDK's bound on its exit-time sync
  hydrateTimeoutMs: 600_000, // 10 minutes: about 100 GB at the speed of a network volume
  strict: false,
});

/** A single path component that cannot climb or hide: letters, digits, `.`, `_`, `-`. */
const SAFE_NAME = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

/** The mirror name of a folder given by path alone: its path with separators as `_` (`/root/.cache/hf` → `root_.cache_hf`). */
export function defaultDirName(path: string): string {
  return (
    resolve(path)
      .replace(/^[/\\]+/, "")
      .replace(/[^A-Za-z0-9._-]/g, "_")
      .slice(-128) || "root"
  );
}

/** The warm cache's options schema, built on first use: only a handler with `warmCache` needs it (docs/benchmarks.md, "Cold start"). */
function makeSchema() {
  const dirSchema = z.union([
    z.string().refine(isAbsolute, "an absolute path"),
    z.object({
      path: z.string().refine(isAbsolute, "an absolute path"),
      name: z.string().regex(SAFE_NAME, "a name of letters, digits, . _ - (not . or ..)"),
    }),
  ]);
  return z.object({
    dirs: z.array(dirSchema).min(1, "at least one folder"),
    volume: nonEmptyString().default(WARM_CACHE_DEFAULTS.volume),
    namespace: z.string().regex(SAFE_NAME, "a name of letters, digits, . _ - (not . or ..)").optional(),
    smallFileBytes: integerOption(0, WARM_CACHE_DEFAULTS.smallFileBytes, 67_108_864, "64 MiB"),
    parallelCopies: integerOption(1, WARM_CACHE_DEFAULTS.parallelCopies, 64),
    shutdownSyncMs: durationOption(0, WARM_CACHE_DEFAULTS.shutdownSyncMs),
    hydrateTimeoutMs: durationOption(1, WARM_CACHE_DEFAULTS.hydrateTimeoutMs),
    strict: booleanOption(WARM_CACHE_DEFAULTS.strict),
  });
}
let schema: ReturnType<typeof makeSchema> | undefined;

/** Checks `options` (RUNLET_HANDLER_INVALID names the bad one, `prefix` first); two folders may not share a name. */
export function checkWarmCacheOptions(options: WarmCacheOptions, prefix = "warmCache."): WarmCacheSettings {
  schema ??= makeSchema();
  const o = parseOptions(schema, options, "RUNLET_HANDLER_INVALID", prefix);
  const dirs = o.dirs.map((d) =>
    typeof d === "string"
      ? { path: resolve(d), name: defaultDirName(d) }
      : { path: resolve(d.path), name: d.name },
  );
  const names = new Set<string>();
  for (const d of dirs) {
    if (names.has(d.name)) {
      throw new RunletError(
        "RUNLET_HANDLER_INVALID",
        `${prefix}dirs must name each folder's mirror once, got "${d.name}" twice (give one { path, name })`,
      );
    }
    names.add(d.name);
  }
  return Object.freeze({ ...o, dirs: Object.freeze(dirs), namespace: o.namespace });
}
