import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, rename, symlink, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { pack as tarPack } from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readManifest, WarmCache } from "../../src/cache/index.js";
import { createLogger } from "../../src/log/index.js";
import {
  BIG,
  cacheFixture,
  entry,
  linesMatching,
  NOW,
  paths,
  put,
  tree,
  writeManifestFile,
} from "../support/cache-fixture.js";

// Issue 42, items 6 and 12: symbolic links planted on the volume or in a cached folder, made for
// real on disk. None may be followed: nothing is read from or written to a place outside the
// mirror or the cached folder.

let fx: Awaited<ReturnType<typeof cacheFixture>>;
beforeAll(async () => {
  fx = await cacheFixture();
});
afterAll(async () => {
  await fx.close();
});

const SECRET = "the container's secret";

/** A file outside both the volume and the container, as a secret in the container would be. */
async function secret(base: string) {
  await put(join(base, "outside"), "secret.txt", SECRET, NOW);
  return join(base, "outside", "secret.txt");
}

describe("symbolic links on the volume (item 6)", () => {
  it("a blob that is a link to a container file is not copied into the cache, so no later sync publishes it", async () => {
    const { base, root, container } = await fx.setup();
    const target = await secret(base);
    await mkdir(join(root, "big", "hf"), { recursive: true });
    await symlink(target, join(root, "big", "hf", "creds.bin"));
    await writeManifestFile(root, { files: [entry("creds.bin", SECRET.length, false)] });
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 0, refused: 1 });
    expect(existsSync(join(b.dir, "creds.bin"))).toBe(false);
    expect(linesMatching(b.sink, /refused 1 entr\(ies\) that would leave their folder/)).toHaveLength(1);
  });

  it("a big/<dir> that is a link to a folder outside the mirror is neither read from nor written through", async () => {
    const { base, root, container } = await fx.setup();
    await secret(base);
    await mkdir(join(root, "big"), { recursive: true });
    await symlink(join(base, "outside"), join(root, "big", "hf"));
    await writeManifestFile(root, { files: [entry("secret.txt", SECRET.length, false)] });
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 0, refused: 1 });
    expect(await tree(b.dir)).toEqual({});
    // A sync of a large file refuses to write through the link; the manifest does not list it.
    await put(b.dir, "weights.bin", BIG);
    await put(b.dir, "small.txt", "s");
    expect(await b.cache.sync()).toMatchObject({ status: "synced", files: 1, refused: 1 });
    expect(await paths(join(base, "outside"))).toEqual(["secret.txt"]);
    // (secret.txt is the hand-written manifest's own entry, kept as a sync keeps what the volume lists.)
    expect((await readManifest(root))?.files.map((f) => f.path).sort()).toEqual(["secret.txt", "small.txt"]);
  });

  it("a big/ that is a link: the large files are refused one by one, the small ones still go up", async () => {
    const { base, root, container } = await fx.setup();
    await mkdir(join(base, "outside"), { recursive: true });
    await mkdir(root, { recursive: true });
    await symlink(join(base, "outside"), join(root, "big"));
    const a = container("a");
    await put(a.dir, "weights.bin", BIG);
    await put(a.dir, "more/weights.bin", BIG);
    await put(a.dir, "small.txt", "s");
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1, refused: 2 });
    expect(await paths(join(base, "outside"))).toEqual([]);
    expect((await readManifest(root))?.files.map((f) => f.path)).toEqual(["small.txt"]);
  });

  it("a big/ that is a link: the sweep of old temporary files does not follow it either", async () => {
    const { base, root, container } = await fx.setup();
    const outside = join(base, "outside");
    await mkdir(outside, { recursive: true });
    // A file outside the mirror whose name a sweep would take for a killed sync's leftover.
    const victim = join(outside, "notes.bin.0badf00d.runlet-tmp");
    await writeFile(victim, "not the cache's");
    const old = new Date(Date.now() - 11 * 60_000);
    await utimes(victim, old, old);
    await mkdir(root, { recursive: true });
    await symlink(outside, join(root, "big"));
    const a = container("a");
    await put(a.dir, "small.txt", "s");
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1 });
    expect(await paths(outside)).toEqual(["notes.bin.0badf00d.runlet-tmp"]);
  });

  it("a manifest or an archive that is a link is refused, and a mirror folder that is a link is not synced into", async () => {
    const { base, root, volume, container } = await fx.setup();
    const a = container("a");
    await put(a.dir, "small.txt", "s");
    await a.cache.sync();
    const manifest = await readManifest(root);
    // The manifest as a link to a copy elsewhere.
    await writeFile(join(base, "elsewhere.json"), JSON.stringify(manifest));
    await rename(join(root, "manifest.json"), join(base, "kept.json"));
    await symlink(join(base, "elsewhere.json"), join(root, "manifest.json"));
    const b = container("b");
    const run = await b.cache.hydrate();
    expect(run).toMatchObject({ status: "failed" });
    expect(run.reason).toBe(
      `${join(root, "manifest.json")} is a symbolic link; refused (the warm cache follows no symbolic link)`,
    );
    // The archive as a link: its entries stay cold.
    await rename(join(base, "kept.json"), join(root, "manifest.json"));
    const archive = manifest?.archive as string;
    await rename(join(root, archive), join(base, archive));
    await symlink(join(base, archive), join(root, archive));
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 0, refused: 1, missing: 1 });
    // The namespace's folder as a link to a place outside the volume: no sync writes there.
    const other = container("other");
    await put(other.dir, "x.txt", "x");
    await mkdir(join(base, "elsewhere-mirror"));
    await mkdir(join(volume, ".runlet-cache"), { recursive: true });
    const linked = new WarmCache(
      { ...other.settings, namespace: "ep2" },
      createLogger({ platform: true, level: "silent" }),
      "ep2",
    );
    await symlink(join(base, "elsewhere-mirror"), join(volume, ".runlet-cache", "ep2"));
    const synced = await linked.sync();
    expect(synced.status).toBe("failed");
    expect(synced.reason).toMatch(/ep2 is a symbolic link; refused/);
    expect(await paths(join(base, "elsewhere-mirror"))).toEqual([]);
  });
});

describe("symbolic links in the cached folder (item 12)", () => {
  it("a planted link makes hydrate create no folder outside before it refuses the entry", async () => {
    const { base, root, container } = await fx.setup();
    const b = container("b");
    await mkdir(join(base, "outside"), { recursive: true });
    await mkdir(b.dir, { recursive: true });
    await symlink(join(base, "outside"), join(b.dir, "link"));
    // One packed and one large entry, each under the link and two folders deeper.
    const archive = "small-00000000-0000-4000-8000-000000000001.tar";
    await mkdir(root, { recursive: true });
    const p = tarPack();
    const out = createWriteStream(join(root, archive));
    p.pipe(out);
    await new Promise<void>((resolve, reject) =>
      p.entry({ name: "hf/link/deep/er/small.txt", mtime: new Date(NOW) }, "evil", (err) =>
        err ? reject(err) : resolve(),
      ),
    );
    p.finalize();
    await finished(out);
    await put(join(root, "big", "hf", "link", "deeper", "still"), "large.bin", BIG);
    await put(root, "big/hf/fine.bin", BIG);
    await writeManifestFile(root, {
      archive,
      files: [
        entry("link/deep/er/small.txt", 4, true),
        entry("link/deeper/still/large.bin", BIG.length, false),
        entry("fine.bin", BIG.length, false),
      ],
    });
    const run = await b.cache.hydrate();
    expect(run).toMatchObject({ status: "hydrated", files: 1, refused: 2 });
    expect(await paths(join(base, "outside"))).toEqual([]);
    expect(await readFile(join(b.dir, "fine.bin"))).toEqual(BIG);
    // A sync does not follow it either: the link is not a folder of the cache.
    await put(join(base, "outside"), "planted.txt", "not the cache's");
    await utimes(join(base, "outside", "planted.txt"), new Date(NOW), new Date(NOW));
    await b.cache.sync();
    expect((await readManifest(root))?.files.map((f) => f.path).sort()).toEqual([
      "fine.bin",
      "link/deep/er/small.txt",
      "link/deeper/still/large.bin",
    ]);
  });
});
