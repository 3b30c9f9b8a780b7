import { existsSync } from "node:fs";
import { mkdir, open, readdir, rm, truncate, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkWarmCacheOptions } from "../../src/cache/index.js";
import {
  BIG,
  cacheFixture,
  entry,
  linesMatching,
  OLD,
  paths,
  put,
  tmpfsUnavailable,
  tree,
  writeManifestFile,
} from "../support/cache-fixture.js";

// Issue 42, items 11 and 13: a hydrate restores what it can and is bounded in entries, bytes and
// time. The disk bound is tested on a real small filesystem (a tmpfs as the container's folder).

const unavailable = await tmpfsUnavailable();
const skipped = unavailable === undefined ? "" : ` (skipped: ${unavailable})`;

let fx: Awaited<ReturnType<typeof cacheFixture>>;
beforeAll(async () => {
  fx = await cacheFixture();
});
afterAll(async () => {
  await fx.close();
});

describe("a hydrate whose volume lacks a file (item 11)", () => {
  it("leaves that one large file cold and restores the rest", async () => {
    const { root, container } = await fx.setup();
    const a = container("a");
    for (let i = 0; i < 5; i++) await put(a.dir, `shards/${i}.bin`, BIG, OLD);
    for (let i = 0; i < 50; i++) await put(a.dir, `small/${i}.txt`, `s${i}`, OLD);
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 55 });
    await rm(join(root, "big", "hf", "shards", "3.bin"));
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 54, missing: 1 });
    const got = Object.keys(await tree(b.dir));
    expect(got).toHaveLength(54);
    expect(got).not.toContain("shards/3.bin");
    expect(
      linesMatching(
        b.sink,
        /^warm cache hydrate: hydrated, 54 file\(s\), .*; left 1 file\(s\) cold \(missing or changed on the volume\)$/,
      ),
    ).toHaveLength(1);
    // strict is about failures, not about a file the volume lost: the same hydrate passes under it.
    const strict = container("c", { strict: true });
    expect(await strict.cache.hydrate()).toMatchObject({ status: "hydrated", files: 54, missing: 1 });
  });
});

describe("a hydrate's bounds (item 13)", () => {
  it("refuses a manifest listing more entries than a sync writes, before looking at them", async () => {
    const { root, container } = await fx.setup();
    const files = Array.from({ length: 100_001 }, (_, i) => entry(`f/${i}`, 1, false));
    await writeManifestFile(root, { files });
    const b = container("b");
    const run = await b.cache.hydrate();
    expect(run).toMatchObject({
      status: "failed",
      reason: `${join(root, "manifest.json")} lists 100001 files, more than the 100000 a sync writes`,
    });
    expect(existsSync(b.dir)).toBe(false);
  });

  it("refuses a manifest over 64 MiB without reading it", async () => {
    const { root, container } = await fx.setup();
    await mkdir(root, { recursive: true });
    await writeFile(join(root, "manifest.json"), "");
    await truncate(join(root, "manifest.json"), 65 * 1_048_576); // sparse: no 65 MiB written
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({
      status: "failed",
      reason: `${join(root, "manifest.json")} is 65.0 MiB, more than the 64.0 MiB a manifest may be`,
    });
  });

  it("stops at hydrateTimeoutMs, keeping the files restored so far", async () => {
    const { root, container } = await fx.setup();
    const files = [];
    for (let i = 0; i < 300; i++) {
      await put(join(root, "big", "hf", "many"), `${i}.bin`, BIG, OLD);
      files.push(entry(`many/${i}.bin`, BIG.length, false, OLD));
    }
    await writeManifestFile(root, { files });
    const b = container("b", { hydrateTimeoutMs: 1, parallelCopies: 1 });
    const run = await b.cache.hydrate();
    expect(run.status).toBe("failed");
    expect(run.reason).toMatch(
      /^ran past hydrateTimeoutMs \(1 ms\) with \d+ file\(s\) restored; the rest stay cold$/,
    );
    expect(run.files).toBeLessThan(300);
    const left = await readdir(join(b.dir, "many")).catch(() => [] as string[]);
    expect(left.filter((n) => n.includes(".runlet-tmp"))).toEqual([]);
    expect(left).toHaveLength(run.files);
  });

  it("refuses a duration past what a timer holds", () => {
    expect(() => checkWarmCacheOptions({ dirs: ["/a"], hydrateTimeoutMs: 2 ** 31 })).toThrow(
      "warmCache.hydrateTimeoutMs",
    );
    expect(() => checkWarmCacheOptions({ dirs: ["/a"], shutdownSyncMs: 30 * 86_400_000 })).toThrow(
      "warmCache.shutdownSyncMs",
    );
  });

  it.skipIf(unavailable !== undefined)(
    `leaves a sparse 1 GiB blob cold on a 16 MiB disk instead of inflating it, and restores the rest${skipped}`,
    async () => {
      const { root, container } = await fx.setup();
      const b = container("b");
      await fx.tmpfs(b.dir, 16 * 1_048_576);
      await mkdir(join(root, "big", "hf"), { recursive: true });
      const blob = join(root, "big", "hf", "huge.bin");
      const handle = await open(blob, "w");
      await handle.truncate(1_073_741_824); // 1 GiB, sparse: no block written
      await handle.close();
      await utimes(blob, new Date(OLD), new Date(OLD));
      await put(join(root, "big", "hf"), "fine.bin", BIG, OLD);
      await writeManifestFile(root, {
        files: [entry("huge.bin", 1_073_741_824, false, OLD), entry("fine.bin", BIG.length, false, OLD)],
      });
      const run = await b.cache.hydrate();
      expect(run).toMatchObject({ status: "hydrated", files: 1, overBudget: 1 });
      expect(await paths(b.dir)).toEqual(["fine.bin"]);
      expect(
        linesMatching(
          b.sink,
          /left 1 file\(s\) cold \(restoring them would leave less than 10 % of the disk free\)$/,
        ),
      ).toHaveLength(1);
    },
  );
});
