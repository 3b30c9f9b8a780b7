import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Manifest, readManifest } from "../../src/cache/index.js";
import { lockTiming } from "../../src/cache/sync-lock.js";
import { BIG, cacheFixture, NOW, OLD, put, tree } from "../support/cache-fixture.js";

// Issue 42, items 5, 7 and 10: workers that share a network volume. Two WarmCache objects in one
// process stand in for two workers: they meet only through the files on the volume (a real folder).

let fx: Awaited<ReturnType<typeof cacheFixture>>;
beforeAll(async () => {
  fx = await cacheFixture();
});
afterAll(async () => {
  await fx.close();
});
const timing = { ...lockTiming };
afterEach(() => {
  Object.assign(lockTiming, timing);
});

const ELEVEN_MINUTES_AGO = new Date(NOW - 11 * 60_000);

describe("two workers syncing at once (item 5)", () => {
  it("lose neither one's files: the second sync starts from the first's manifest", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    const b = container("b");
    for (let i = 0; i < 30; i++) {
      await put(a.dir, `only-a/${i}.txt`, `a-${i}`);
      await put(b.dir, `only-b/${i}.txt`, `b-${i}`);
    }
    for (let i = 0; i < 3; i++) {
      await put(a.dir, `only-a/${i}.bin`, BIG);
      await put(b.dir, `only-b/${i}.bin`, BIG);
    }
    const runs = await Promise.all([a.cache.sync(), b.cache.sync()]);
    expect(runs.map((r) => [r.status, r.files])).toEqual([
      ["synced", 33],
      ["synced", 33],
    ]);
    const manifest = (await readManifest(root)) as Manifest;
    expect(manifest.files).toHaveLength(66);
    const c = container("c");
    expect(await c.cache.hydrate()).toMatchObject({ status: "hydrated", files: 66 });
    const got = Object.keys(await tree(c.dir));
    expect(got.filter((k) => k.startsWith("only-a/"))).toHaveLength(33);
    expect(got.filter((k) => k.startsWith("only-b/"))).toHaveLength(33);
    expect(existsSync(join(root, "sync.lock"))).toBe(false);
  });

  it("does not say synced while another worker holds the mirror's lock, and takes over a lock left by a killed one", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    await put(a.dir, "mine.txt", "a's");
    await mkdir(root, { recursive: true });
    // Another worker's sync holds the lock and keeps it fresh.
    await writeFile(join(root, "sync.lock"), JSON.stringify({ owner: "another-worker" }));
    Object.assign(lockTiming, { waitMs: 300, staleMs: 60_000 });
    const run = await a.cache.sync();
    expect(run.status).toBe("failed");
    expect(run.reason).toBe(
      `another worker has held ${join(root, "sync.lock")} for more than 300 ms; a later sync sends these files`,
    );
    expect(await readManifest(root)).toBeUndefined();
    // The holder was killed: its lock stays untouched, and after staleMs the next sync takes it over.
    Object.assign(lockTiming, { waitMs: 60_000, staleMs: 200 });
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1 });
    expect((await readManifest(root))?.files.map((f) => f.path)).toEqual(["mine.txt"]);
    expect((await readdir(root)).filter((n) => n.startsWith("sync.lock"))).toEqual([]);
  });
});

describe("a directory planted at sync.lock (issue 51, item 12)", () => {
  it("fails that sync with a clear error, leaves nothing behind, and the next sync works", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    await put(a.dir, "mine.txt", "a's");
    const lock = join(root, "sync.lock");
    await mkdir(join(lock, "inside"), { recursive: true });
    await writeFile(join(lock, "inside", "f.txt"), "x");
    Object.assign(lockTiming, { waitMs: 60_000, staleMs: 200 });
    const run = await a.cache.sync();
    expect(run.status).toBe("failed");
    expect(run.reason).toBe(
      `${lock} is a directory, not a lock file a worker makes; it was removed, and the next sync takes the lock`,
    );
    expect(await readdir(root)).toEqual([]);
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1 });
    expect(
      (await readdir(root)).filter((n) => n.startsWith("sync.lock") || n.includes(".runlet-tmp")),
    ).toEqual([]);
  });
});

describe("a sync beside a hydrate (item 7)", () => {
  it("keeps the archive it replaced for ten minutes from the replacement, not from the archive's creation", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    await put(a.dir, "one.txt", "1");
    await a.cache.sync();
    const first = (await readManifest(root))?.archive as string;
    // The archive was made long ago; a hydrate has just read the manifest that names it.
    await utimes(join(root, first), ELEVEN_MINUTES_AGO, ELEVEN_MINUTES_AGO);
    await put(a.dir, "two.txt", "2");
    expect(await a.cache.sync()).toMatchObject({ status: "synced" });
    const second = (await readManifest(root))?.archive as string;
    expect(second).not.toBe(first);
    expect(existsSync(join(root, first))).toBe(true);
    // The hydrate that read the old manifest still finds its archive.
    const b = container("b");
    const oldManifest: Manifest = {
      version: 1,
      writtenAt: NOW,
      archive: first,
      files: [{ dir: "hf", path: "one.txt", size: 1, mtimeMs: NOW, packed: true }],
    };
    const current = await readFile(join(root, "manifest.json"));
    await writeFile(join(root, "manifest.json"), JSON.stringify(oldManifest));
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 1 });
    await writeFile(join(root, "manifest.json"), current);
    // Ten minutes after it stopped being named, a later sync removes it.
    await utimes(join(root, first), ELEVEN_MINUTES_AGO, ELEVEN_MINUTES_AGO);
    await put(a.dir, "three.txt", "3");
    await a.cache.sync();
    expect(existsSync(join(root, first))).toBe(false);
  });

  it("re-reads the manifest when its archive is gone, and leaves only what is really missing cold", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    await put(a.dir, "small.txt", "s", OLD);
    await put(a.dir, "large.bin", BIG, OLD);
    await a.cache.sync();
    const manifest = (await readManifest(root)) as Manifest;
    await writeFile(
      join(root, "manifest.json"),
      JSON.stringify({ ...manifest, archive: "small-00000000-0000-4000-8000-000000000000.tar" }),
    );
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 1, missing: 1 });
    expect(await tree(b.dir)).toEqual({ "large.bin": BIG.toString("latin1") });
  });
});

describe("temporary files of a killed sync (item 10)", () => {
  it("are swept from big/<dir>/ by a later sync once ten minutes old; younger ones stay", async () => {
    const { container, root } = await fx.setup();
    const a = container("a");
    await put(a.dir, "weights/model.bin", BIG);
    await a.cache.sync();
    const folder = join(root, "big", "hf", "weights");
    const stray = join(folder, "shard-1.bin.deadbeef.runlet-tmp");
    const young = join(folder, "shard-2.bin.cafebabe.runlet-tmp");
    await writeFile(stray, Buffer.alloc(8192));
    await writeFile(young, Buffer.alloc(8192));
    await writeFile(join(root, "big", "hf", "top.bin.0badf00d.runlet-tmp"), "x");
    await utimes(stray, ELEVEN_MINUTES_AGO, ELEVEN_MINUTES_AGO);
    await utimes(
      join(root, "big", "hf", "top.bin.0badf00d.runlet-tmp"),
      ELEVEN_MINUTES_AGO,
      ELEVEN_MINUTES_AGO,
    );
    await put(a.dir, "weights/other.bin", BIG);
    expect(await a.cache.sync()).toMatchObject({ status: "synced" });
    expect((await readdir(folder)).sort()).toEqual([
      "model.bin",
      "other.bin",
      "shard-2.bin.cafebabe.runlet-tmp",
    ]);
    expect(await readdir(join(root, "big", "hf"))).toEqual(["weights"]);
  });
});
