import { createWriteStream, existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { finished } from "node:stream/promises";
import { pack as tarPack } from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkWarmCacheOptions,
  type Manifest,
  readManifest,
  WarmCache,
  type WarmCacheOptions,
} from "../../src/cache/index.js";
import { defineHandler } from "../../src/index.js";
import { createLogger } from "../../src/log/index.js";
import { startWorker } from "../../src/worker/index.js";
import { logSink, memoryHarness, testHarness } from "../support/workers.js";

// docs/fitness.md, "Warm cache": real folders in a temporary directory stand in for the container's
// cache folder and for the network volume's mount.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-cache-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

let n = 0;
/** A fresh volume folder and a way to make containers (each with its own `hf` folder) on it. */
async function setup(options: Partial<WarmCacheOptions> = {}) {
  const base = join(tmp, `case-${++n}`);
  const volume = join(base, "volume");
  await mkdir(volume, { recursive: true });
  const root = join(volume, ".runlet-cache", "ep1");
  const container = (name: string) => {
    const dir = join(base, name, "hf");
    const sink = logSink();
    const log = createLogger({ platform: true, level: "debug", destination: sink.stream });
    const settings = checkWarmCacheOptions({
      dirs: [{ path: dir, name: "hf" }],
      volume,
      smallFileBytes: 1024,
      ...options,
    });
    return { dir, sink, cache: new WarmCache(settings, log, "ep1") };
  };
  return { base, volume, root, container };
}

const NOW = Date.now();
const OLD = NOW - 100_000;

async function put(dir: string, rel: string, content: string | Buffer, mtimeMs = NOW): Promise<void> {
  const path = join(dir, rel);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
  await utimes(path, new Date(mtimeMs), new Date(mtimeMs));
}

/** Every file under `dir`, as `rel → content`. */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, prefix: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(join(d, e.name), `${prefix}${e.name}/`);
      else out[`${prefix}${e.name}`] = (await readFile(join(d, e.name))).toString("latin1");
    }
  };
  await walk(dir, "");
  return out;
}

const BIG = Buffer.alloc(4096, 7); // over the 1 KiB threshold of these tests: copied one by one

describe("the warm cache", () => {
  it("starts cold from an empty volume, and is off without a mounted volume", async () => {
    const { container, base } = await setup();
    const a = container("a");
    expect(await a.cache.hydrate()).toMatchObject({
      status: "cold",
      files: 0,
      reason: "no manifest on the volume yet",
    });
    const missing = new WarmCache(
      checkWarmCacheOptions({ dirs: [join(base, "x")], volume: join(base, "not-mounted") }),
      createLogger({ platform: true, level: "silent" }),
      "ep1",
    );
    expect(await missing.hydrate()).toMatchObject({
      status: "off",
      reason: `${join(base, "not-mounted")} is not a mounted folder`,
    });
    expect(await missing.sync()).toMatchObject({ status: "off" });
    const noNamespace = new WarmCache(
      checkWarmCacheOptions({ dirs: [join(base, "x")] }),
      createLogger({ platform: true, level: "silent" }),
      undefined,
    );
    expect((await noNamespace.sync()).reason).toBe(
      "no namespace: set warmCache.namespace or RUNPOD_ENDPOINT_ID",
    );
  });

  it("syncs small files packed and large ones one by one, then hydrates them into a fresh container with their times", async () => {
    const { container, root } = await setup();
    const a = container("a");
    await put(a.dir, "config.json", '{"a":1}', OLD);
    await put(a.dir, "sub/tokenizer.txt", "tokens");
    await put(a.dir, "weights/model.bin", BIG);
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 3 });
    const manifest = (await readManifest(root)) as Manifest;
    expect(manifest.version).toBe(1);
    expect(manifest.files.map((f) => [f.path, f.packed]).sort()).toEqual([
      ["config.json", true],
      ["sub/tokenizer.txt", true],
      ["weights/model.bin", false],
    ]);
    expect(existsSync(join(root, manifest.archive as string))).toBe(true);
    expect(existsSync(join(root, "big", "hf", "weights", "model.bin"))).toBe(true);

    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 3, bytes: 7 + 6 + 4096 });
    expect(await tree(b.dir)).toEqual(await tree(a.dir));
    expect(Math.abs((await stat(join(b.dir, "config.json"))).mtimeMs - OLD)).toBeLessThan(1_000);
    // Nothing changed since: a second sync writes nothing, a second hydrate copies nothing.
    expect(await a.cache.sync()).toMatchObject({ status: "unchanged", files: 0 });
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 0 });
  });

  it("lets the newer copy win both ways", async () => {
    const { container } = await setup();
    const a = container("a");
    await put(a.dir, "kernel.txt", "v1", OLD);
    await put(a.dir, "mine.txt", "a's", OLD);
    await a.cache.sync();

    // Hydrate: the volume's newer kernel.txt... is older here, so b keeps its own newer copy;
    // mine.txt is older in b, so the volume's copy replaces it.
    const b = container("b");
    await put(b.dir, "kernel.txt", "v2", NOW);
    await put(b.dir, "mine.txt", "b's stale", OLD - 50_000);
    expect(await b.cache.hydrate()).toMatchObject({ files: 1 });
    expect(await tree(b.dir)).toEqual({ "kernel.txt": "v2", "mine.txt": "a's" });

    // Sync: b's newer kernel.txt goes up; a's older copy does not overwrite it.
    expect(await b.cache.sync()).toMatchObject({ status: "synced", files: 1 });
    expect(await a.cache.sync()).toMatchObject({ status: "unchanged" });
    const c = container("c");
    await c.cache.hydrate();
    expect(await tree(c.dir)).toEqual({ "kernel.txt": "v2", "mine.txt": "a's" });
    // The other way: a file only the volume has stays on it when a container without it syncs.
    const d = container("d");
    await put(d.dir, "other.txt", "d's");
    await d.cache.sync();
    const e = container("e");
    await e.cache.hydrate();
    expect(await tree(e.dir)).toEqual({ "kernel.txt": "v2", "mine.txt": "a's", "other.txt": "d's" });
  });

  it("refuses archive members and manifest entries that would leave the folder (../, a planted link)", async () => {
    const { container, root, base } = await setup();
    const b = container("b");
    await mkdir(root, { recursive: true });
    // An archive written by hand, as a hostile or broken writer could: one good member, one climbing out.
    const archive = "small-00000000-0000-4000-8000-000000000000.tar";
    const p = tarPack();
    const out = createWriteStream(join(root, archive));
    p.pipe(out);
    const member = (name: string, text: string) =>
      new Promise<void>((resolve, reject) =>
        p.entry({ name, mtime: new Date(NOW) }, text, (err) => (err ? reject(err) : resolve())),
      );
    await member("hf/ok.txt", "fine");
    await member("hf/../../escape.txt", "evil");
    await member("hf/link/through.txt", "evil");
    p.finalize();
    await finished(out);
    const entry = (path: string, size: number) => ({ dir: "hf", path, size, mtimeMs: NOW, packed: true });
    const manifest: Manifest = {
      version: 1,
      writtenAt: NOW,
      archive,
      files: [entry("ok.txt", 4), entry("../../escape.txt", 4), entry("link/through.txt", 4)],
    };
    await writeFile(join(root, "manifest.json"), JSON.stringify(manifest));
    // A link inside the container's folder that points outside it.
    await mkdir(join(base, "outside"), { recursive: true });
    await mkdir(b.dir, { recursive: true });
    await symlink(join(base, "outside"), join(b.dir, "link"));

    const run = await b.cache.hydrate();
    // The ../ entry of the manifest, the ../ member of the archive, and the entry through the link.
    expect(run).toMatchObject({ status: "hydrated", files: 1, refused: 3 });
    expect(await readFile(join(b.dir, "ok.txt"), "utf8")).toBe("fine");
    expect(existsSync(join(base, "b", "escape.txt"))).toBe(false);
    expect(existsSync(join(base, "escape.txt"))).toBe(false);
    expect(await readdir(join(base, "outside"))).toEqual([]);
    expect(
      b.sink.lines.some((l) =>
        String(l["message"]).includes("refused 3 entr(ies) that would leave their folder"),
      ),
    ).toBe(true);
  });

  it("leaves one whole manifest when two workers sync at once, every entry backed by a whole file", async () => {
    const { container, root } = await setup();
    const a = container("a");
    const b = container("b");
    for (let i = 0; i < 20; i++) {
      await put(a.dir, `shared/${i}.txt`, `a-${i}`, OLD + i);
      await put(b.dir, `shared/${i}.txt`, `b-${i}-longer`, OLD + i);
      await put(a.dir, `only-a/${i}.bin`, Buffer.alloc(2048 + i, 1));
      await put(b.dir, `only-b/${i}.txt`, `b-${i}`);
    }
    await put(a.dir, "both.bin", Buffer.alloc(3000, 1));
    await put(b.dir, "both.bin", Buffer.alloc(5000, 2));
    const runs = await Promise.all([a.cache.sync(), b.cache.sync()]);
    expect(runs.map((r) => r.status)).toEqual(["synced", "synced"]);
    const manifest = (await readManifest(root)) as Manifest;
    expect(manifest.version).toBe(1);
    const c = container("c");
    await c.cache.hydrate();
    const got = await tree(c.dir);
    // Every file restored has the size its manifest entry gives; every packed entry was in the archive.
    for (const f of manifest.files) {
      if (f.packed) expect(got[f.path]?.length, f.path).toBe(f.size);
      else if (got[f.path] !== undefined) expect(got[f.path]?.length, f.path).toBe(f.size);
    }
    // One more sync each, one after the other, converges on the union.
    await a.cache.sync();
    await b.cache.sync();
    const d = container("d");
    await d.cache.hydrate();
    const all = await tree(d.dir);
    expect(Object.keys(all).filter((k) => k.startsWith("only-a/"))).toHaveLength(20);
    expect(Object.keys(all).filter((k) => k.startsWith("only-b/"))).toHaveLength(20);
    expect(Object.keys(all).filter((k) => k.startsWith("shared/"))).toHaveLength(20);
    expect(await readdir(root).then((names) => names.filter((x) => x.endsWith(".runlet-tmp")))).toEqual([]);
  });

  it("refuses a large file whose way on the volume is not a folder, and goes on with the rest", async () => {
    const { container, root } = await setup();
    const a = container("a");
    await put(a.dir, "first.bin", BIG);
    await put(a.dir, "small.txt", "s");
    await a.cache.sync();
    // A plain file stands where a folder must go: that one file is refused, the others go up.
    await put(a.dir, "a-second.bin", BIG);
    await put(a.dir, "sub/third.bin", BIG);
    await writeFile(join(root, "big", "hf", "sub"), "not a folder");
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1, refused: 1 });
    expect(((await readManifest(root)) as Manifest).files.map((f) => f.path).sort()).toEqual([
      "a-second.bin",
      "first.bin",
      "small.txt",
    ]);
    expect(await readFile(join(root, "big", "hf", "sub"), "utf8")).toBe("not a folder");
  });

  it("is one log line and a cold start on a manifest it refuses, and unfit-making only with strict", async () => {
    const { container, root } = await setup();
    const a = container("a");
    await put(a.dir, "small.txt", "s");
    await a.cache.sync();
    await writeFile(join(root, "manifest.json"), '{"version":1,"files":[');
    const b = container("b");
    const run = await b.cache.hydrate();
    expect(run).toMatchObject({ status: "failed", reason: `${join(root, "manifest.json")} is not JSON` });
    expect(
      b.sink.lines.filter((l) =>
        /^warm cache hydrate failed \(.*\); a cold start$/.test(String(l["message"])),
      ),
    ).toHaveLength(1);
    expect(await tree(b.dir)).toEqual({});
    // strict turns the same failure into an error.
    const strict = new WarmCache(
      checkWarmCacheOptions({
        dirs: [{ path: b.dir, name: "hf" }],
        volume: join(root, "..", ".."),
        strict: true,
        smallFileBytes: 1024,
      }),
      createLogger({ platform: true, level: "silent" }),
      "ep1",
    );
    await expect(strict.hydrate()).rejects.toMatchObject({ code: "RUNLET_WARM_CACHE_FAILED" });
    // A sync rewrites it, saying why in a line of its own.
    expect(await a.cache.sync()).toMatchObject({ status: "synced", files: 1 });
    expect(
      a.sink.lines.some((l) => String(l["message"]).endsWith("is not JSON; this sync writes a new one")),
    ).toBe(true);
    expect(await readManifest(root)).toMatchObject({ version: 1 });
  });

  it("keeps the entries of folders another handler version caches under the same namespace", async () => {
    const { base, volume, container } = await setup();
    const a = container("a");
    await put(a.dir, "weights.txt", "hf's");
    await a.cache.sync();
    const otherDir = join(base, "other", "kernels");
    await put(otherDir, "k.txt", "kernels'");
    const other = new WarmCache(
      checkWarmCacheOptions({ dirs: [{ path: otherDir, name: "kernels" }], volume, smallFileBytes: 1024 }),
      createLogger({ platform: true, level: "silent" }),
      "ep1",
    );
    expect(await other.sync()).toMatchObject({ status: "synced", files: 1 });
    const b = container("b");
    expect(await b.cache.hydrate()).toMatchObject({ status: "hydrated", files: 1 });
    expect(await tree(b.dir)).toEqual({ "weights.txt": "hf's" });
  });

  it("refuses bad options, naming them", () => {
    expect(() => checkWarmCacheOptions({ dirs: ["relative/path"] })).toThrow(
      "warmCache.dirs[0] must be an absolute path",
    );
    expect(() =>
      checkWarmCacheOptions({
        dirs: [
          { path: "/a", name: "x" },
          { path: "/b", name: "x" },
        ],
      }),
    ).toThrow('warmCache.dirs must name each folder\'s mirror once, got "x" twice');
    expect(() => checkWarmCacheOptions({ dirs: ["/a"], namespace: "../up" })).toThrow("warmCache.namespace");
    expect(checkWarmCacheOptions({ dirs: ["/root/.cache/hf"] }).dirs).toEqual([
      { path: "/root/.cache/hf", name: "root_.cache_hf" },
    ]);
  });
});

describe("the warm cache in the worker", () => {
  it("hydrates before the first take, syncs after start-up and at shutdown what jobs added", async () => {
    const { container, root, volume } = await setup();
    const a = container("a");
    await put(a.dir, "warm.txt", "from an earlier worker");
    await a.cache.sync();

    const b = container("b");
    await using h = memoryHarness();
    const sink = logSink();
    const definition = defineHandler({
      warmCache: { dirs: [{ path: b.dir, name: "hf" }], volume, smallFileBytes: 1024 },
      handler: async () => {
        const seen = await readFile(join(b.dir, "warm.txt"), "utf8");
        await writeFile(join(b.dir, "compiled.txt"), "made by a job");
        return seen;
      },
    });
    const w = await startWorker(definition, {
      env: { ...h.workerEnv("local", { podId: "pod-cache" }), RUNPOD_ENDPOINT_ID: "ep1" },
      connect: () => h.connect(),
      logDestination: sink.stream,
      shutdownGraceMs: 1_000,
      flushTimeoutMs: 1_000,
    });
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id);
    expect(job.output).toBe("from an earlier worker");
    // On demand, while the worker runs: what the job made goes up now...
    // (the background sync after start-up may have sent it already, when its scan came after the job).
    expect(["synced", "unchanged"]).toContain((await w.syncWarmCache())?.status);
    expect(((await readManifest(root)) as Manifest).files.map((f) => f.path).sort()).toEqual([
      "compiled.txt",
      "warm.txt",
    ]);
    await writeFile(join(b.dir, "late.txt"), "after the on-demand sync");
    // ...and what came after it, with the last sync at shutdown.
    await w.close();
    const manifest = (await readManifest(root)) as Manifest;
    expect(manifest.files.map((f) => f.path).sort()).toEqual(["compiled.txt", "late.txt", "warm.txt"]);
    // The job read the hydrated file, so the hydrate came before the first take.
    expect(sink.lines.filter((l) => l["cache"] === "hydrate").map((l) => [l["status"], l["files"]])).toEqual([
      ["hydrated", 1],
    ]);
  });

  it("takes jobs cold when the volume is broken, and is unfit with check=cache only under strict", async () => {
    const { base } = await setup();
    const volumeFile = join(base, "volume-is-a-file");
    await writeFile(volumeFile, "x");
    // On loopback: the strict worker's unfitness is read from its pings.
    await using h = await testHarness();
    const cold = await startWorker(
      defineHandler({ warmCache: { dirs: [join(base, "c")], volume: volumeFile }, handler: () => "cold" }),
      {
        env: { ...h.workerEnv("local", { podId: "pod-cold" }), RUNPOD_ENDPOINT_ID: "ep1" },
        logDestination: logSink().stream,
      },
    );
    expect((await h.waitForJob(h.enqueue("local", { input: {} }))).output).toBe("cold");
    await cold.close();

    const broken = join(base, "broken-volume");
    await mkdir(join(broken, ".runlet-cache", "ep1"), { recursive: true });
    await writeFile(
      join(broken, ".runlet-cache", "ep1", "manifest.json"),
      // Torn: a manifest the cache refuses (a missing archive would only leave its files cold).
      '{"version":1,"writtenAt":0,"files":[{"dir":"c"',
    );
    const strict = await startWorker(
      defineHandler({
        warmCache: { dirs: [{ path: join(base, "c"), name: "c" }], volume: broken, strict: true },
        handler: () => "never",
      }),
      {
        env: { ...h.workerEnv("local", { podId: "pod-strict" }), RUNPOD_ENDPOINT_ID: "ep1" },
        logDestination: logSink().stream,
      },
    );
    expect(await strict.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const pings = h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
    expect(pings.map((p) => p.query["check"])).toEqual(["cache"]);
  });
});
