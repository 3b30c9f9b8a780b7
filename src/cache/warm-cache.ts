import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { importPeer } from "../optional-peers.js";
import type { CacheDir, WarmCacheSettings } from "./cache-options.js";
import { keyOf, type LocalFile, newer, prepareInside, scanLocal } from "./local-files.js";
import {
  MANIFEST_VERSION,
  type Manifest,
  type ManifestEntry,
  readManifest,
  safeJoin,
  TEMP_SUFFIX,
  writeManifest,
} from "./manifest.js";

/**
 * The warm cache (docs/fitness.md, "Warm cache"): folders of the container mirrored on the network
 * volume at `<volume>/.runlet-cache/<namespace>/`. `hydrate()` brings what is missing or newer on
 * the volume into the container; `sync()` sends what is missing or newer in the container to the
 * volume. Files under `smallFileBytes` travel packed in one archive (one file to open on a network
 * filesystem instead of thousands), larger ones are copied one by one, `parallelCopies` at once.
 * Every write goes to a temporary name and is renamed; the manifest is written last and names its
 * own archive, so two workers syncing at once leave one whole manifest whose files are whole.
 * Best-effort: a failure is one log line and a cold start, unless `strict`.
 */

/** What a hydrate or sync did. */
export interface CacheRun {
  /** `off`: no volume or no namespace; `cold`: nothing on the volume yet; `unchanged`: nothing to send. */
  readonly status: "off" | "cold" | "hydrated" | "unchanged" | "synced" | "failed";
  readonly files: number;
  readonly bytes: number;
  readonly ms: number;
  /** Why it was off or failed; entries refused as unsafe, when any. */
  readonly reason?: string;
  readonly refused?: number;
}

type TarStream = typeof import("tar-stream");

/** Largest packed file read into memory, in bytes: the largest `smallFileBytes` allowed. */
const MAX_PACKED_BYTES = 67_108_864; // 64 MiB

/** Archives and temporary files older than this may be removed by a sync (a reader may still hold a newer one). */
const STALE_MS = 10 * 60_000;

function loadTar(): Promise<TarStream> {
  return importPeer<TarStream>("tar-stream", "tar-stream", "the warm cache (warmCache)");
}

async function isDir(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() === true;
}

/** Runs `work` over `items`, `limit` at a time; stops starting new ones once `signal` aborts. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  signal: AbortSignal,
  work: (item: T) => Promise<void>,
) {
  let next = 0;
  const lane = async () => {
    while (next < items.length && !signal.aborted) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (signal.aborted) throw signal.reason ?? new Error("aborted");
}

/** Copies `src` to `dest` through a temporary name beside it, with `mtimeMs` set before the rename. */
async function copyAtomic(src: string, dest: string, mtimeMs: number): Promise<void> {
  const tmp = `${dest}.${randomUUID().slice(0, 8)}${TEMP_SUFFIX}`;
  try {
    await copyFile(src, tmp);
    await utimes(tmp, new Date(), new Date(mtimeMs));
    await rename(tmp, dest);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}

async function writeAtomic(dest: string, data: Buffer, mtimeMs: number): Promise<void> {
  const tmp = `${dest}.${randomUUID().slice(0, 8)}${TEMP_SUFFIX}`;
  try {
    await writeFile(tmp, data);
    await utimes(tmp, new Date(), new Date(mtimeMs));
    await rename(tmp, dest);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}

/** Reads each member of `archive` that `want` asks for (by member name); members must be regular files. */
async function readArchive(
  tar: TarStream,
  archive: string,
  want: (name: string, size: number) => boolean,
  take: (name: string, data: Buffer) => Promise<void>,
): Promise<void> {
  const extract = tar.extract();
  const source = createReadStream(archive);
  source.on("error", (err) => extract.destroy(err));
  source.pipe(extract);
  for await (const entry of extract) {
    const { name, size, type } = entry.header;
    if (type !== "file" || !want(name, size)) {
      entry.resume();
      continue;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    await take(name, Buffer.concat(chunks));
  }
}

/** The warm cache of one worker. Create it with the handler's checked `warmCache` settings. */
export class WarmCache {
  readonly #settings: WarmCacheSettings;
  readonly #log: Logger;
  readonly #namespace: string | undefined;
  readonly #dirs: ReadonlyMap<string, CacheDir>;
  #syncing: Promise<CacheRun> | undefined;
  /** The one sync that runs after the current one, shared by every call made meanwhile. */
  #queued: Promise<CacheRun> | undefined;
  readonly #stop = new AbortController();

  constructor(settings: WarmCacheSettings, log: Logger, endpointId: string | undefined) {
    this.#settings = settings;
    this.#log = log.child({ warmCache: true });
    this.#namespace = settings.namespace ?? endpointId;
    this.#dirs = new Map(settings.dirs.map((d) => [d.name, d]));
  }

  /** The mirror's folder on the volume, or undefined without a namespace. */
  get root(): string | undefined {
    return this.#namespace === undefined
      ? undefined
      : join(this.#settings.volume, ".runlet-cache", this.#namespace);
  }

  async #off(): Promise<string | undefined> {
    if (this.#namespace === undefined) return "no namespace: set warmCache.namespace or RUNPOD_ENDPOINT_ID";
    if (!(await isDir(this.#settings.volume))) return `${this.#settings.volume} is not a mounted folder`;
    return undefined;
  }

  /** The volume entry's local path, or undefined when its folder is not configured or its path unsafe. */
  #target(e: { dir: string; path: string }): string | undefined {
    const dir = this.#dirs.get(e.dir);
    return dir === undefined ? undefined : safeJoin(dir.path, e.path);
  }

  /**
   * Volume → container: copies what is missing or newer on the volume. `signal` (the worker's
   * closing) stops it between files: a shutdown does not wait for a whole hydrate. Never rejects
   * unless `strict`.
   */
  async hydrate(signal: AbortSignal = this.#stop.signal): Promise<CacheRun> {
    const started = performance.now();
    const ms = () => Math.round(performance.now() - started);
    const off = await this.#off();
    if (off !== undefined)
      return this.#report("hydrate", { status: "off", files: 0, bytes: 0, ms: ms(), reason: off });
    try {
      const root = this.root as string;
      const manifest = await readManifest(root);
      if (manifest === undefined)
        return this.#report("hydrate", {
          status: "cold",
          files: 0,
          bytes: 0,
          ms: ms(),
          reason: "no manifest on the volume yet",
        });
      let refused = 0;
      const todo = new Map<string, { entry: ManifestEntry; dest: string }>();
      for (const entry of manifest.files) {
        const dest = this.#target(entry);
        if (dest === undefined) {
          if (this.#dirs.has(entry.dir)) refused += 1;
          continue;
        }
        const local = await stat(dest).catch(() => undefined);
        const wanted =
          local === undefined || newer(entry, local) || (!newer(local, entry) && local.size !== entry.size);
        if (wanted) todo.set(keyOf(entry), { entry, dest });
      }
      let files = 0;
      let bytes = 0;
      const place = async (dest: string, dir: string, write: () => Promise<void>, size: number) => {
        if (!(await prepareInside((this.#dirs.get(dir) as CacheDir).path, dest))) {
          refused += 1;
          return;
        }
        await write();
        files += 1;
        bytes += size;
      };
      const packed = [...todo.values()].filter((t) => t.entry.packed);
      if (packed.length > 0 && manifest.archive !== null) {
        const tar = await loadTar();
        await readArchive(
          tar,
          join(root, manifest.archive),
          (name, size) => {
            if (signal.aborted) throw signal.reason;
            const t = todo.get(name);
            if (t === undefined) {
              // A member the manifest does not list, or one that would leave its folder (../, /abs).
              if (safeJoin("/x", name) === undefined) refused += 1;
              return false;
            }
            return t.entry.packed && t.entry.size === size && size <= MAX_PACKED_BYTES;
          },
          async (name, data) => {
            const t = todo.get(name) as { entry: ManifestEntry; dest: string };
            await place(t.dest, t.entry.dir, () => writeAtomic(t.dest, data, t.entry.mtimeMs), data.length);
          },
        );
      }
      const big = [...todo.values()].filter((t) => !t.entry.packed);
      await eachLimited(big, this.#settings.parallelCopies, signal, async ({ entry, dest }) => {
        const src = safeJoin(join(root, "big", entry.dir), entry.path);
        const blob = src === undefined ? undefined : await stat(src);
        // Another worker replaced the blob after this manifest was written: leave it cold rather than mislabel it.
        if (
          src === undefined ||
          blob === undefined ||
          blob.size !== entry.size ||
          newer(blob, entry) ||
          newer(entry, blob)
        )
          return;
        await place(dest, entry.dir, () => copyAtomic(src, dest, entry.mtimeMs), entry.size);
      });
      return this.#report("hydrate", {
        status: "hydrated",
        files,
        bytes,
        ms: ms(),
        ...(refused > 0 ? { refused } : {}),
      });
    } catch (err) {
      return this.#failed("hydrate", err, ms());
    }
  }

  /**
   * Container → volume: sends what is missing or newer in the container. One sync runs at a time;
   * a call during one runs once more after it (calls in between share that run).
   */
  sync(): Promise<CacheRun> {
    if (this.#syncing === undefined) {
      this.#syncing = this.#syncOnce().finally(() => {
        this.#syncing = undefined;
      });
      return this.#syncing;
    }
    this.#queued ??= this.#syncing.then(() => {
      this.#queued = undefined;
      return this.sync();
    });
    return this.#queued;
  }

  /** Starts a sync in the background (after setup, without delaying jobs); its outcome is logged. */
  startSync(): void {
    this.sync().catch((err: unknown) => this.#log.warn({ err }, "warm cache sync failed"));
  }

  /** At shutdown: waits for a running sync and runs a last one, for at most `shutdownSyncMs`; then abandons it. */
  async close(): Promise<void> {
    const bound = this.#settings.shutdownSyncMs;
    let timer: NodeJS.Timeout | undefined;
    const last = this.sync().then(() => undefined);
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), bound);
    });
    try {
      if ((await Promise.race([last, timedOut])) === "timeout") {
        this.#stop.abort(
          new RunletError("RUNLET_WARM_CACHE_FAILED", `the last sync ran past shutdownSyncMs (${bound} ms)`),
        );
        this.#log.warn(
          { shutdownSyncMs: bound },
          `warm cache: the last sync ran past ${bound} ms (shutdownSyncMs) and was abandoned`,
        );
      }
    } catch (err) {
      this.#log.warn({ err }, "warm cache: the last sync failed");
    } finally {
      clearTimeout(timer);
    }
  }

  async #syncOnce(): Promise<CacheRun> {
    const started = performance.now();
    const ms = () => Math.round(performance.now() - started);
    const off = await this.#off();
    if (off !== undefined)
      return this.#report("sync", { status: "off", files: 0, bytes: 0, ms: ms(), reason: off });
    try {
      const root = this.root as string;
      await mkdir(join(root, "big"), { recursive: true });
      const old = await readManifest(root);
      const { files: local, truncated } = await scanLocal(this.#settings.dirs);
      if (truncated)
        this.#log.warn(`warm cache: more than ${local.length} files; the rest wait for a later sync`);
      const kept = new Map<string, ManifestEntry>();
      // Entries of folders this worker does not cache (another handler version's) are kept as they are.
      for (const e of old?.files ?? []) {
        const usable = this.#dirs.has(e.dir)
          ? this.#target(e) !== undefined
          : safeJoin("/", `${e.dir}/${e.path}`);
        if (usable) kept.set(keyOf(e), e);
      }
      // Newer wins: a local file goes up when the volume lacks it or holds an older (or, at the same time, different) copy.
      const send: LocalFile[] = [];
      for (const f of local) {
        const v = kept.get(keyOf(f));
        if (v === undefined || newer(f, v) || (!newer(v, f) && v.size !== f.size)) send.push(f);
      }
      if (send.length === 0 && old !== undefined && kept.size === old.files.length) {
        return this.#report("sync", { status: "unchanged", files: 0, bytes: 0, ms: ms() });
      }
      const small = this.#settings.smallFileBytes;
      const sendBig = send.filter((f) => f.size >= small);
      const sendSmall = send.filter((f) => f.size < small);
      let bytes = 0;
      await eachLimited(sendBig, this.#settings.parallelCopies, this.#stop.signal, async (f) => {
        const dest = join(root, "big", f.dir, f.path);
        await mkdir(join(dest, ".."), { recursive: true });
        await copyAtomic(f.abs, dest, f.mtimeMs);
        bytes += f.size;
        kept.set(keyOf(f), { dir: f.dir, path: f.path, size: f.size, mtimeMs: f.mtimeMs, packed: false });
      });
      for (const f of sendSmall) kept.delete(keyOf(f));
      let archive = old?.archive ?? null;
      const packedKept = [...kept.values()].filter((e) => e.packed);
      if (
        sendSmall.length > 0 ||
        (old !== undefined && packedKept.length !== old.files.filter((e) => e.packed).length)
      ) {
        const written = await this.#pack(root, old, packedKept, sendSmall, kept);
        archive = written.archive;
        bytes += written.bytes;
      }
      const manifest: Manifest = {
        version: MANIFEST_VERSION,
        writtenAt: Date.now(),
        archive,
        files: [...kept.values()],
      };
      await writeManifest(root, manifest);
      await this.#sweep(root, archive);
      return this.#report("sync", { status: "synced", files: send.length, bytes, ms: ms() });
    } catch (err) {
      return this.#failed("sync", err, ms());
    }
  }

  /**
   * Writes a new archive: the packed entries kept from the old one (the volume's copy was newer),
   * then the container's small files; sets each packed entry in `kept`. A kept member missing from
   * the old archive is dropped from the manifest.
   */
  async #pack(
    root: string,
    old: Manifest | undefined,
    packedKept: readonly ManifestEntry[],
    sendSmall: readonly LocalFile[],
    kept: Map<string, ManifestEntry>,
  ): Promise<{ archive: string | null; bytes: number }> {
    for (const e of packedKept) kept.delete(keyOf(e));
    if (packedKept.length === 0 && sendSmall.length === 0) return { archive: null, bytes: 0 };
    const tar = await loadTar();
    const name = `small-${randomUUID()}.tar`;
    const tmp = join(root, `${name}${TEMP_SUFFIX}`);
    const pack = tar.pack();
    const out = createWriteStream(tmp);
    pack.pipe(out);
    const add = (entry: ManifestEntry, data: Buffer) =>
      new Promise<void>((resolve, reject) =>
        pack.entry(
          {
            name: keyOf(entry),
            size: data.length,
            mtime: new Date(entry.mtimeMs),
            type: "file",
            mode: 0o644,
          },
          data,
          (err) => (err ? reject(err) : resolve()),
        ),
      );
    let bytes = 0;
    try {
      const fromOld = new Map(packedKept.map((e) => [keyOf(e), e]));
      if (fromOld.size > 0 && old?.archive != null) {
        await readArchive(
          tar,
          join(root, old.archive),
          (member, size) => fromOld.get(member)?.size === size && size <= MAX_PACKED_BYTES,
          async (member, data) => {
            const e = fromOld.get(member) as ManifestEntry;
            await add(e, data);
            kept.set(member, e);
          },
        );
      }
      for (const f of sendSmall) {
        if (this.#stop.signal.aborted) throw this.#stop.signal.reason;
        const data = await readFile(f.abs).catch(() => undefined);
        if (data === undefined) continue; // removed since the scan: nothing to send
        const e: ManifestEntry = {
          dir: f.dir,
          path: f.path,
          size: data.length,
          mtimeMs: f.mtimeMs,
          packed: true,
        };
        await add(e, data);
        kept.set(keyOf(e), e);
        bytes += data.length;
      }
      pack.finalize();
      await finished(out);
      await rename(tmp, join(root, name));
      return { archive: name, bytes };
    } catch (err) {
      pack.destroy();
      out.destroy();
      await rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
  }

  /** Removes archives the manifest no longer names and temporary files, once older than {@link STALE_MS}. */
  async #sweep(root: string, archive: string | null): Promise<void> {
    const now = Date.now();
    for (const name of await readdir(root).catch(() => [] as string[])) {
      const stale =
        (name.startsWith("small-") && name.endsWith(".tar") && name !== archive) ||
        name.endsWith(TEMP_SUFFIX);
      if (!stale) continue;
      const st = await stat(join(root, name)).catch(() => undefined);
      if (st !== undefined && now - st.mtimeMs > STALE_MS)
        await rm(join(root, name), { force: true }).catch(() => undefined);
    }
  }

  #report(what: "hydrate" | "sync", run: CacheRun): CacheRun {
    const mb = (run.bytes / 1_048_576).toFixed(1);
    const text =
      run.status === "off"
        ? `warm cache ${what}: off (${run.reason})`
        : run.status === "cold"
          ? `warm cache ${what}: cold start (${run.reason})`
          : `warm cache ${what}: ${run.status}, ${run.files} file(s), ${mb} MB in ${run.ms} ms`;
    const fields = {
      cache: what,
      status: run.status,
      files: run.files,
      bytes: run.bytes,
      ms: run.ms,
    };
    if (run.refused !== undefined) {
      this.#log.warn(
        { ...fields, refused: run.refused },
        `${text}; refused ${run.refused} entr(ies) that would leave their folder`,
      );
    } else this.#log.info(fields, text);
    return run;
  }

  #failed(what: "hydrate" | "sync", err: unknown, ms: number): CacheRun {
    const reason = err instanceof Error ? err.message : String(err);
    if (this.#settings.strict) {
      throw new RunletError("RUNLET_WARM_CACHE_FAILED", `warm cache ${what} failed: ${reason}`, {
        cause: err,
      });
    }
    this.#log.warn(
      { cache: what, status: "failed", ms, err },
      `warm cache ${what} failed (${reason}); ${what === "hydrate" ? "a cold start" : "the volume keeps its previous copy"}`,
    );
    return { status: "failed", files: 0, bytes: 0, ms, reason };
  }
}
