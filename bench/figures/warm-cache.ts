import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, open, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateRawSync } from "node:zlib";
import pino from "pino";
import { checkWarmCacheOptions, WarmCache } from "../../src/cache/index.js";
import type { BenchOptions } from "../options.js";
import { type Figure, figure, repeat } from "../stats.js";

/**
 * The warm cache's worth (docs/fitness.md, "Warm cache"): the start-up of a worker whose setup builds
 * a derived file when its cache misses (deflate at level 9 of random blocks, standing in for
 * compiled kernels or converted weights), cold (empty volume: hydrate finds nothing, setup builds)
 * and warm (a fresh container folder on the same volume: hydrate copies the file, setup finds it).
 * Both time the same two steps the worker runs before its first take: the hydrate and the user's
 * own warm step. The sync that follows a cold start runs in the background in a worker; its time is
 * the third figure. The volume is a folder on this machine's disk, so the warm figure is a lower
 * bound of a network volume's.
 */

const BLOCK = 1_048_576; // 1 MiB

/** The user's warm step: the derived file if it is there and whole, else builds it. */
async function ensureDerived(dir: string, inputBytes: number): Promise<"found" | "built"> {
  const path = join(dir, "derived.bin");
  const marker = join(dir, "derived.done");
  const done = await stat(marker).catch(() => undefined);
  if (done !== undefined && (await stat(path).catch(() => undefined)) !== undefined) return "found";
  await mkdir(dir, { recursive: true });
  const file = await open(path, "w");
  try {
    for (let i = 0; i < inputBytes / BLOCK; i++) {
      await file.write(deflateRawSync(randomBytes(BLOCK), { level: 9 }));
    }
  } finally {
    await file.close();
  }
  await writeFile(marker, "ok");
  return "built";
}

/** Cold start, warm start and the background sync, `options.repetitions` times each. */
export async function measureWarmCache(options: BenchOptions): Promise<Figure[]> {
  const root = await mkdtemp(join(tmpdir(), "runlet-bench-cache-"));
  const log = pino({ level: "silent" });
  const cold: number[] = [];
  const warm: number[] = [];
  const sync: number[] = [];
  let derivedBytes = 0;
  try {
    await repeat(options.repetitions, async (run) => {
      const volume = join(root, `volume-${run}`);
      await mkdir(volume);
      const cache = (name: string) => {
        const dir = join(root, `${name}-${run}`, "kernels");
        const settings = checkWarmCacheOptions({ dirs: [{ path: dir, name: "kernels" }], volume });
        return { dir, cache: new WarmCache(settings, log, "bench") };
      };
      const first = cache("first");
      let t = performance.now();
      await first.cache.hydrate();
      if ((await ensureDerived(first.dir, options.warmCache.derivedInputBytes)) !== "built")
        throw new Error("a cold start found the file");
      cold.push(performance.now() - t);
      t = performance.now();
      const synced = await first.cache.sync();
      sync.push(performance.now() - t);
      if (synced.status !== "synced") throw new Error(`the sync did not complete: ${synced.reason}`);
      derivedBytes = (await stat(join(first.dir, "derived.bin"))).size;

      const second = cache("second");
      t = performance.now();
      await second.cache.hydrate();
      if ((await ensureDerived(second.dir, options.warmCache.derivedInputBytes)) !== "found")
        throw new Error("a warm start rebuilt the file");
      warm.push(performance.now() - t);
      await rm(join(root, `first-${run}`), { recursive: true, force: true });
      await rm(join(root, `second-${run}`), { recursive: true, force: true });
      await rm(volume, { recursive: true, force: true });
    });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
  const size = `${(derivedBytes / BLOCK).toFixed(0)} MiB derived file`;
  return [
    figure("cache.coldStart", `start-up, cache cold: hydrate (miss) + setup builds the ${size}`, "ms", cold),
    figure(
      "cache.warmStart",
      `start-up, cache warm: hydrate (copies the ${size}) + setup finds it`,
      "ms",
      warm,
    ),
    figure("cache.sync", "the sync after a cold start (in the background in a worker)", "ms", sync),
  ];
}
